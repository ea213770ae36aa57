-- streamwin 0.8 -> 0.9: a changelog query's start rows are its own transaction's,
-- and a changelog source's table is not rewritten behind its back.
--
-- A query over a changelog table source starts from the table's rows,
-- which the transaction that creates (or resets) it writes into the WAL as
-- logical messages tagged with the query's id.  Any role may write a
-- logical message, so a message of that tag from another transaction
-- would have been taken as a row of the table.  query_sources gets
-- snapshot_xid, the transaction that set the query's start: only its
-- messages are the query's rows.  Queries started before the update have
-- none (NULL), and keep taking their start's messages by tag alone until
-- reset_query starts them again.
--
-- An ALTER TABLE that rewrites a changelog source's table (a column's type,
-- SET UNLOGGED) is refused by an event trigger: it changed the rows with
-- nothing in the WAL for the source, and later retractions took back
-- values no query had added.
--
-- streamwin.sources shows another role's schema registry URL without the
-- login it may hold.
--
-- The control functions (start_query, stop_query, drop_query, reset_query,
-- run_batch, run_available, drop_source) refuse a NULL argument, saying so,
-- where they did nothing and returned NULL.

\echo Use "ALTER EXTENSION streamwin UPDATE TO '0.9'" to load this file. \quit

ALTER TABLE streamwin.query_sources ADD COLUMN snapshot_xid xid8;

-- A changelog table source retracts each row as the WAL last gave it.  An
-- ALTER TABLE that rewrites the table's rows (ALTER COLUMN ... TYPE, SET
-- UNLOGGED) changes them with nothing in the WAL for the source to decode,
-- and its queries would later retract values they never added: refused
-- while the table has such a source.  Rewrites that leave the values be
-- (a column added with a volatile default, another access method) go on.
CREATE FUNCTION streamwin.refuse_changelog_rewrite() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	tab regclass := pg_catalog.pg_event_trigger_table_rewrite_oid();
	names text;
BEGIN
	-- 1: its persistence changes, 4: a column's values are rewritten
	IF pg_catalog.pg_event_trigger_table_rewrite_reason() & 5 = 0 THEN
		RETURN;
	END IF;
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(name), ', ' ORDER BY name) INTO names
	  FROM streamwin.source_catalog
	 WHERE source_table = tab AND options->>'changes' = 'all';
	IF names IS NOT NULL THEN
		RAISE EXCEPTION 'table % cannot be rewritten while changelog source % reads it', tab, names
			USING ERRCODE = 'object_in_use',
				  DETAIL = 'This ALTER TABLE changes the table''s rows without writing the changes into the WAL, '
						   'so the source''s queries would later retract values they never added.',
				  HINT = 'Drop the source''s queries and the source, alter the table, then create them again: '
						 'they start from the table''s rows as they are then.';
	END IF;
END
$$;
CREATE EVENT TRIGGER streamwin_changelog_rewrite ON table_rewrite
	EXECUTE FUNCTION streamwin.refuse_changelog_rewrite();

CREATE OR REPLACE VIEW streamwin.sources AS
SELECT s.name, s.kind, s.brokers, s.topic, s.format, s.columns,
	   -- librdkafka properties and the schema registry's login may hold
	   -- credentials: only the owner sees them (a login in the URL too)
	   CASE WHEN pg_catalog.pg_has_role(s.owner, 'USAGE') THEN s.options
			WHEN s.options ? 'schema_registry' THEN
				pg_catalog.jsonb_set(s.options - ARRAY['kafka', 'schema_registry_user', 'schema_registry_password'],
									 '{schema_registry}',
									 pg_catalog.to_jsonb(pg_catalog.regexp_replace(s.options ->> 'schema_registry',
																				   '://[^/?#]*@', '://')))
			ELSE s.options - ARRAY['kafka', 'schema_registry_user', 'schema_registry_password']
	   END AS options,
	   s.relation,
	   s.source_table,
	   s.slot_name,
	   -- bytes of WAL a table source's slot keeps from being removed
	   CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN
			pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), r.restart_lsn)::bigint
	   END AS retained_wal,
	   s.owner, s.created_at,
	   -- the zone of the source's batches: of timestamps without an offset
	   s.options ->> 'timezone' AS timezone
FROM streamwin.source_catalog s
LEFT JOIN pg_catalog.pg_replication_slots r ON r.slot_name = s.slot_name;

-- The control functions say that a NULL argument is not allowed, instead of
-- doing nothing and returning NULL (STRICT).
ALTER FUNCTION streamwin.drop_source(text) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.start_query(text) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.stop_query(text) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.drop_query(text, boolean) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.reset_query(text, text) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.run_batch(text) CALLED ON NULL INPUT;
ALTER FUNCTION streamwin.run_available(text) CALLED ON NULL INPUT;
