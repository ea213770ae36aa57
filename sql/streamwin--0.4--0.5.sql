/* streamwin 0.4 -> 0.5: creating a table source is a privilege.
 *
 * A table source's replication slot keeps WAL for as long as its queries
 * lag, so its creation is kept, as PostgreSQL keeps every slot's, to
 * superusers and REPLICATION roles, and to roles an administrator grants
 * EXECUTE on streamwin.create_table_source_slot(), which creates every
 * slot of a table source and which PUBLIC may not execute.  The launcher
 * warns about a table source whose slot retains more WAL than
 * streamwin.retained_wal_warning, at most every 5 minutes
 * (source_catalog.wal_warned_at).
 */

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.5'" to load this file. \quit

-- Creates the replication slot of a table source, for create_table_source
-- (and for reset_query, replacing a slot that PostgreSQL invalidated), and
-- refuses any other call.  EXECUTE on it is the privilege to create table
-- sources: a slot keeps WAL for as long as its queries lag, so, as
-- PostgreSQL does for every slot, PUBLIC may not.  Superusers and roles
-- with REPLICATION may without it; an administrator allows another role
-- with GRANT EXECUTE ON FUNCTION streamwin.create_table_source_slot() TO it.
CREATE FUNCTION streamwin.create_table_source_slot()
RETURNS text
AS 'MODULE_PATHNAME', 'streamwin_create_table_source_slot'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION streamwin.create_table_source_slot() FROM PUBLIC;

-- table sources: when the launcher last warned that the slot retains more
-- WAL than streamwin.retained_wal_warning (NULL: not over it)
ALTER TABLE streamwin.source_catalog ADD COLUMN wal_warned_at timestamptz;
