CREATE VIEW SiC_sales(storeID, category, TotalCount, EarliestSale, TotalQuantity) AS
SELECT storeID, category, COUNT(*) AS TotalCount, MIN(date) AS EarliestSale, SUM(qty) AS TotalQuantity
FROM pos, items
WHERE pos.itemID = items.itemID
GROUP BY storeID, category
