-- streamwin 0.9 -> 1.0: aggregates with an inverse transition function over
-- a changelog, the rewrite guard under every session_replication_role, and
-- an aggregate's collation for its combine and final functions.
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
--
-- An aggregate of the user's that streamwin keeps as its transition state
-- got its input collation in its transition function only: its combine
-- and final functions ran without one, which made a collation-aware one
-- (text_smaller) fail every batch after the first, and one in SQL compare
-- in the database's collation (least(x COLLATE "C") gave another value).
-- combine_states, combined_state and finish_state take the collation as a
-- last argument; queries compiled before call them without it.

\echo Use "ALTER EXTENSION streamwin UPDATE TO '1.0'" to load this file. \quit

CREATE FUNCTION streamwin.change_set_rows(set bytea, type anyelement)
RETURNS anyarray
AS 'MODULE_PATHNAME', 'streamwin_change_set_rows'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE PARALLEL SAFE;

ALTER EVENT TRIGGER streamwin_changelog_rewrite ENABLE ALWAYS;

-- ... and with the aggregate's input collation, which its combine and
-- final functions get, as its transition function does (the calls above
-- take their arguments' collation: none for states).
CREATE FUNCTION streamwin.combined_state_accum(internal, regprocedure, bytea, regcollation)
RETURNS internal
AS 'MODULE_PATHNAME', 'streamwin_combined_state_accum'
LANGUAGE C;

CREATE AGGREGATE streamwin.combined_state(aggregate regprocedure, state bytea, collation regcollation) (
	SFUNC = streamwin.combined_state_accum,
	STYPE = internal,
	FINALFUNC = streamwin.state_serialize
);

CREATE FUNCTION streamwin.combine_states(aggregate regprocedure, a bytea, b bytea, collation regcollation)
RETURNS bytea
AS 'MODULE_PATHNAME', 'streamwin_combine_states'
LANGUAGE C;

CREATE FUNCTION streamwin.finish_state(aggregate regprocedure, state bytea, result_type anyelement,
									   collation regcollation)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'streamwin_finish_state'
LANGUAGE C;
