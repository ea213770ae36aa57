/* streamwin 0.4 -> 0.5
 *
 * Queries created from 0.5 on keep their open groups in a state store in
 * the worker's memory (src/state_store.c), which writes only the changed
 * rows of the state and result tables; streamwin.store_rows() gives the
 * statements the store's groups.  Queries created before keep running
 * their SQL statements.
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.5'" to load this file. \quit

-- The groups a continuous query's state store writes to its result
-- (src/state_store.c), as rows of its state table; what its compiled
-- statements read.  Outside a batch of the query it returns no rows.
CREATE FUNCTION streamwin.store_rows(query_id integer, which text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'streamwin_store_rows'
LANGUAGE C STRICT VOLATILE ROWS 1000;
