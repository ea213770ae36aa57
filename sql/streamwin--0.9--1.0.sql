-- streamwin 0.9 -> 1.0: aggregates with an inverse transition function over
-- a changelog, and the rewrite guard under every session_replication_role.
--
-- Over a changelog source, an aggregate that PostgreSQL can run as a
-- moving aggregate (one created with MSFUNC and MINVFUNC), beyond the
-- built-in ones streamwin maps itself, keeps the counted values of its
-- argument per group and runs over the values the group's rows hold:
-- change_set_rows hands them over, each as many times as rows hold it.
--
-- The event trigger that refuses a rewrite of a changelog source's table
-- fired only with session_replication_role at origin or local; under
-- replica, which a session may set to skip triggers, the rewrite went on.

\echo Use "ALTER EXTENSION streamwin UPDATE TO '1.0'" to load this file. \quit

CREATE FUNCTION streamwin.change_set_rows(set bytea, type anyelement)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_change_set_rows'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

ALTER EVENT TRIGGER streamwin_changelog_rewrite ENABLE ALWAYS;
