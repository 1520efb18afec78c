-- The retail example of paper 001, Figure 1: a point-of-sale fact table and two dimensions.
CREATE TABLE stores (
    storeID INTEGER PRIMARY KEY,
    city    VARCHAR NOT NULL,
    region  VARCHAR NOT NULL
);

CREATE TABLE items (
    itemID   INTEGER PRIMARY KEY,
    name     VARCHAR NOT NULL,
    category VARCHAR NOT NULL,
    cost     DECIMAL(10,2)
);

CREATE TABLE pos (
    storeID INTEGER NOT NULL REFERENCES stores(storeID),
    itemID  INTEGER NOT NULL REFERENCES items(itemID),
    date    DATE NOT NULL,
    qty     INTEGER,
    price   DECIMAL(10,2)
);
