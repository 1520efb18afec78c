CREATE VIEW sR_sales(region, TotalCount, TotalQuantity) AS
SELECT region, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity
FROM pos, stores
WHERE pos.storeID = stores.storeID
GROUP BY region
