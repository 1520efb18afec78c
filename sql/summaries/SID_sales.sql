CREATE VIEW SID_sales(storeID, itemID, date, TotalCount, TotalQuantity) AS
SELECT storeID, itemID, date, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity
FROM pos
GROUP BY storeID, itemID, date
