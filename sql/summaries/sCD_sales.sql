CREATE VIEW sCD_sales(city, date, TotalCount, TotalQuantity) AS
SELECT city, date, COUNT(*) AS TotalCount, SUM(qty) AS TotalQuantity
FROM pos, stores
WHERE pos.storeID = stores.storeID
GROUP BY city, date
