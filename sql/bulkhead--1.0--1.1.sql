/* bulkhead--1.0--1.1.sql: upgrade from 1.0 to 1.1 (ALTER EXTENSION bulkhead UPDATE) */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.1'" to load this file. \quit
