/* bulkhead--1.3--1.4.sql: update an installed bulkhead 1.3 to 1.4 */

\echo Use "ALTER EXTENSION bulkhead UPDATE TO '1.4'" to load this file. \quit
