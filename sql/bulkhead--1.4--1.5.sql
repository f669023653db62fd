/* bulkhead--1.4--1.5.sql: update an installed bulkhead 1.4 to 1.5 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.5'" to load this file. \quit
