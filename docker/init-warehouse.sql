CREATE USER nightshift WITH PASSWORD 'nightshift';
CREATE DATABASE warehouse OWNER nightshift;
