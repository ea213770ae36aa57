-- Sources: a Kafka topic plus the columns its messages decode into.  A source
-- is a relation, so queries over it are checked like queries over a table.
\getenv brokers KAFKA_BROKERS
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

SELECT streamwin.create_kafka_source('orders', :'brokers', 'regress_orders',
    'order_id bigint, region text, amount numeric, event_time timestamptz');
\d orders
-- outside a batch a source has no rows
SELECT * FROM orders;
SELECT name, kind, topic, format, columns, options, relation, timezone FROM streamwin.sources;

-- csv and text formats
SELECT streamwin.create_kafka_source('lines_csv', :'brokers', 'regress_lines',
    'id int, region text, at timestamptz', format => 'csv');
SELECT streamwin.create_kafka_source('lines_raw', :'brokers', 'regress_lines',
    'line text', format => 'text', options => '{"starting_offsets": "latest"}');

-- A timestamp without a zone offset in a message is read in the source's
-- zone, whoever runs the batch: option "timezone", UTC unless given, is
-- recorded with the source (in PostgreSQL's spelling of the name).
SELECT streamwin.create_kafka_source('lines_tokyo', :'brokers', 'regress_lines',
    'id int, region text, at timestamptz', format => 'csv', options => '{"timezone": "asia/tokyo"}');
SELECT name, options, timezone FROM streamwin.sources WHERE name LIKE 'lines%' ORDER BY name;
SELECT streamwin.drop_source('lines_tokyo');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"timezone": "Mars/Olympus"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"timezone": 9}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"timezone": ""}');
-- a zone the server's time zone data no longer has (as US/Pacific-New went
-- in tzdata 2020b; here one it never had): the batch fails saying so, and
-- the source and its query can still be reset and dropped
SELECT streamwin.create_kafka_source('lines_gone', :'brokers', 'regress_lines', 'id int', format => 'csv');
SELECT streamwin.create_query('lines_gone_q', 'SELECT id FROM lines_gone', start => false);
UPDATE streamwin.source_catalog SET options = options || '{"timezone": "Mars/Olympus"}' WHERE name = 'lines_gone';
SELECT streamwin.run_batch('lines_gone_q');
SELECT streamwin.reset_query('lines_gone_q', 'earliest');
SELECT streamwin.drop_query('lines_gone_q', drop_result => true);
SELECT streamwin.drop_source('lines_gone');

-- A column's COLLATE clause is the view's: a query over the source orders
-- and compares its text as the column says.
SELECT streamwin.create_kafka_source('lines_c', :'brokers', 'regress_lines',
    'id int, region text COLLATE "C", city text COLLATE "und-x-icu", at timestamptz', format => 'csv');
SELECT attname, attcollation::regcollation FROM pg_attribute
WHERE attrelid = 'lines_c'::regclass AND attnum > 0 ORDER BY attnum;
SELECT streamwin.drop_source('lines_c');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int COLLATE "C"');

-- mistakes are refused with a hint
SELECT streamwin.create_kafka_source('orders', :'brokers', 'x', 'a int');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', format => 'avro');
-- Avro: a registry or a writer schema, valid, whose fields the columns can hold
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"schema_registry": "http://r:8081", "avro_schema": "\"int\""}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"schema_registry": "ftp://r"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'json',
    '{"schema_registry": "http://r:8081"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"schema_registry": "http://r:8081", "schema_registry_password": "p"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"avro_schema": {"type": "record", "name": "r", "fields": [{"name": "a"}]}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"avro_schema": {"type": "record", "name": "r", "fields": [{"name": "a", "type": "strng"}]}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"avro_schema": {"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"}]}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b text', 'avro',
    '{"avro_schema": "\"long\""}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"avro_schema": {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]},
      "envelope": "debezium"}');
-- a Debezium image is one record (or null): a union of two is refused
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', 'avro',
    '{"avro_schema": {"type": "record", "name": "Envelope", "fields": [
        {"name": "before", "type": ["null", {"type": "record", "name": "V1", "fields": [{"name": "a", "type": "int"}]},
                                    {"type": "record", "name": "V2", "fields": [{"name": "a", "type": "long"}]}]},
        {"name": "after", "type": ["null", "V1"]},
        {"name": "op", "type": "string"}]},
      "envelope": "debezium"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int) INHERITS (orders');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int PRIMARY KEY');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, a text');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a no_such_type');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a text, b text', format => 'text');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"starting_offset": "earliest"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"starting_offsets": "yesterday"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"partitions": "all"}');
-- each partition once, and a number a consumer can assign
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"partitions": [0, 1, 0]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"partitions": [2000000]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"max_records_per_batch": 0}');
SELECT streamwin.create_kafka_source('bad', '', 'x', 'a int');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"kafka": {"enable.auto.commit": "true"}}');
-- properties librdkafka puts into its kinit shell command hold a
-- principal or a file name, nothing a shell would run
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int',
    options => '{"kafka": {"sasl.kerberos.principal": "x; id > /tmp/pwned #"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int',
    options => '{"kafka": {"sasl.kerberos.principal": "-c/tmp/cache"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int',
    options => '{"kafka": {"sasl.kerberos.kinit.cmd": "kinit"}}');
-- nor one that makes librdkafka take over a signal of the server process
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int',
    options => '{"kafka": {"internal.termination.signal": "15"}}');
-- nor statistics that nothing would read
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int',
    options => '{"kafka": {"statistics.interval.ms": "1000"}}');
-- an empty group would make a consumer with nothing to read from
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"kafka": {"group.id": ""}}');
-- partitions are whole numbers
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"partitions": [0.5]}');
-- the "metadata" option names columns filled from the message, not its payload
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"metadata": ["key"]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"metadata": {"a": "topic"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"metadata": {"k": "key"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, k int', options => '{"metadata": {"k": "key"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a text, o int', 'text', '{"metadata": {"o": "offset"}}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'k text', 'text', '{"metadata": {"k": "key"}}');
-- "envelope": a changelog of Debezium events or of upserts, identified by "key_columns"
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"envelope": "maxwell"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"envelope": "upsert"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"key_columns": ["a"]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b int', options => '{"envelope": "upsert", "key_columns": "a"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b int', options => '{"envelope": "upsert", "key_columns": ["A"]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b int', 'csv', '{"envelope": "debezium"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b int', options => '{"envelope": "upsert", "key_columns": ["a"], "metadata": {"a": "partition"}}');
-- key columns must hash and sort (xid hashes, but has no ordering)
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a point, b int', options => '{"envelope": "upsert", "key_columns": ["a"]}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a xid, b int', options => '{"envelope": "upsert", "key_columns": ["a"]}');
SELECT count(*) AS no_leftovers FROM pg_class WHERE relname = 'bad';
-- a changelog's view ends with the change column
SELECT streamwin.create_kafka_source('cdc', :'brokers', 'x', 'id int, amount numeric',
    options => '{"envelope": "debezium", "key_columns": ["id"]}');
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'cdc'::regclass AND attnum > 0 ORDER BY attnum;
SELECT streamwin.drop_source('cdc');

-- librdkafka properties (credentials, say) are shown to the owner only
SELECT streamwin.create_kafka_source('secured', :'brokers', 'regress_orders', 'v text', 'text',
    '{"kafka": {"sasl.username": "app", "sasl.password": "s3cret"}}');
-- and so is the schema registry's login
SELECT streamwin.create_kafka_source('secured_avro', :'brokers', 'regress_orders', 'v text', 'avro',
    '{"schema_registry": "http://registry:8081", "schema_registry_user": "app",
      "schema_registry_password": "s3cret"}');
CREATE ROLE streamwin_other LOGIN;
SELECT options FROM streamwin.sources WHERE name = 'secured';
SELECT options FROM streamwin.sources WHERE name = 'secured_avro';
SET ROLE streamwin_other;
SELECT options FROM streamwin.sources WHERE name = 'secured';
SELECT options FROM streamwin.sources WHERE name = 'secured_avro';
-- and only the owner may drop a source
SELECT streamwin.drop_source('secured');
RESET ROLE;
SELECT streamwin.drop_source('secured_avro');
DROP ROLE streamwin_other;

-- Columns holding a message's partition, offset, timestamp and key, in every
-- format.  A payload key of the same name is not read ("p": 99 below), and a
-- key that is not valid text is a dead letter like a bad payload.
SELECT streamwin.create_kafka_source('keyed', :'brokers', 'regress_keyed',
    'v int, p int, off bigint, kts timestamptz, k text', 'json',
    '{"metadata": {"p": "partition", "off": "offset", "kts": "timestamp", "k": "key"}}');
SELECT streamwin.create_query('keyed_rows', 'SELECT v, p, off, kts > now() - interval ''1 day'' AS recent, k FROM keyed',
    start => false);
-- (how many batches that takes depends on when each partition's messages
-- arrive: the totals do not)
SELECT (streamwin.run_available('keyed_rows')) - 'offsets' - 'batches' AS totals;
SELECT * FROM keyed_rows ORDER BY p, off;
SELECT partition, "offset", convert_from(payload, 'UTF8') AS payload, error FROM streamwin.dead_letters
WHERE source = 'keyed';
-- After a crash (which empties UNLOGGED tables, the marker of intact state
-- included) a query restores its checkpoint and replays the batches since,
-- reading the same messages again: keys included, so it converges.
SELECT streamwin.create_kafka_source('keyed2', :'brokers', 'regress_keyed',
    'v int, off bigint, k text', 'json',
    '{"metadata": {"off": "offset", "k": "key"}, "max_records_per_batch": 2}');
SELECT streamwin.create_query('keyed_counts', 'SELECT k, count(*) AS n, max(off) AS last_offset FROM keyed2 GROUP BY k',
    output_mode => 'update', start => false);
SELECT (streamwin.run_available('keyed_counts'))->'batches' AS batches;
CREATE TEMP TABLE keyed_counts_before AS SELECT * FROM keyed_counts;
DELETE FROM streamwin.state_alive
WHERE query_id = (SELECT query_id FROM streamwin.query_catalog WHERE name = 'keyed_counts');
SELECT r->'replayed' AS replayed, r->'input_rows' AS input_rows
FROM streamwin.run_batch('keyed_counts') r;
SELECT * FROM keyed_counts EXCEPT ALL SELECT * FROM keyed_counts_before;
SELECT * FROM keyed_counts_before EXCEPT ALL SELECT * FROM keyed_counts;
SELECT streamwin.drop_query('keyed_counts', drop_result => true);
SELECT streamwin.drop_source('keyed2');

-- The headers, as a JSON object: a header without a value is null, of
-- repeated names the last counts, and one that is not valid text makes the
-- message a dead letter.  A replay reads them again too.
SELECT streamwin.create_kafka_source('with_headers', :'brokers', 'regress_headers', 'v int, h jsonb', 'json',
    '{"metadata": {"h": "headers"}, "max_records_per_batch": 2}');
SELECT streamwin.create_query('headers_rows', 'SELECT v, h FROM with_headers', start => false);
SELECT streamwin.create_query('headers_dup', 'SELECT h->>''dup'' AS dup, count(*) AS n FROM with_headers GROUP BY 1',
    output_mode => 'update', start => false);
SELECT (streamwin.run_available('headers_rows'))->'input_rows' AS input_rows;
SELECT * FROM headers_rows ORDER BY v;
SELECT "offset", error FROM streamwin.dead_letters WHERE source = 'with_headers';
SELECT (streamwin.run_batch('headers_dup'))->'input_rows' AS input_rows;
SELECT (streamwin.run_batch('headers_dup'))->'input_rows' AS input_rows;
DELETE FROM streamwin.state_alive
WHERE query_id = (SELECT query_id FROM streamwin.query_catalog WHERE name = 'headers_dup');
SELECT r->'replayed' AS replayed, r->'input_rows' AS input_rows FROM streamwin.run_batch('headers_dup') r;
SELECT (streamwin.run_available('headers_dup')) - 'offsets' - 'watermark' - 'batches' AS totals;
SELECT * FROM headers_dup ORDER BY dup;
SELECT streamwin.drop_query(q, drop_result => true) FROM unnest('{headers_rows, headers_dup}'::text[]) q;
SELECT streamwin.drop_source('with_headers');
-- a json column holds each name once too, the last one's value
SELECT streamwin.create_kafka_source('with_headers_json', :'brokers', 'regress_headers', 'v int, h json', 'json',
    '{"metadata": {"h": "headers"}}');
SELECT streamwin.create_query('headers_json_rows', 'SELECT v, h FROM with_headers_json', start => false);
SELECT (streamwin.run_available('headers_json_rows'))->'input_rows' AS input_rows;
SELECT v, h::text AS h FROM headers_json_rows ORDER BY v;
SELECT streamwin.drop_query('headers_json_rows', drop_result => true);
SELECT streamwin.drop_source('with_headers_json');

SELECT streamwin.create_kafka_source('keyed_raw', :'brokers', 'regress_keyed',
    'line text, k bytea, p bigint', 'text', '{"metadata": {"k": "key", "p": "partition"}}');
SELECT streamwin.create_query('keyed_raw_rows', 'SELECT p, k, line FROM keyed_raw', start => false);
SELECT (streamwin.run_available('keyed_raw_rows'))->'input_rows' AS input_rows;
SELECT * FROM keyed_raw_rows ORDER BY p, line;
-- CSV fields go to the other columns, in order; messages without a key
SELECT streamwin.create_kafka_source('lines_meta', :'brokers', 'regress_lines',
    'id int, part int, region text, at timestamptz, k text', 'csv',
    '{"metadata": {"part": "partition", "k": "key"}}');
SELECT streamwin.create_query('lines_meta_rows', 'SELECT id, part, region, at, k IS NULL AS no_key FROM lines_meta',
    start => false);
SELECT (streamwin.run_available('lines_meta_rows'))->'input_rows' AS input_rows;
SELECT * FROM lines_meta_rows ORDER BY id;
SELECT streamwin.drop_query(q, drop_result => true) FROM unnest('{keyed_rows, keyed_raw_rows, lines_meta_rows}'::text[]) q;
SELECT streamwin.drop_source(s) FROM unnest('{keyed, keyed_raw, lines_meta}'::text[]) s;

-- a source read by a query cannot be dropped
SELECT streamwin.create_query('lines_per_region', 'SELECT region, count(*) AS n FROM lines_csv GROUP BY region',
    output_mode => 'update', start => false);
SELECT streamwin.drop_source('lines_csv');
SELECT streamwin.drop_query('lines_per_region', drop_result => true);

SELECT streamwin.drop_source('secured');
SELECT streamwin.drop_source('lines_raw');
SELECT streamwin.drop_source('lines_csv');
SELECT streamwin.drop_source('no_such_source');

-- Source names follow PostgreSQL's rule for table names, as query names do:
-- 'Lines_Upper' is the view lines_upper, '"Lines"' the view "Lines".
SELECT streamwin.create_kafka_source('Lines_Upper', :'brokers', 'regress_lines', 'line text', 'text');
SELECT streamwin.create_kafka_source('"Lines"', :'brokers', 'regress_lines', 'line text', 'text');
SELECT streamwin.create_kafka_source('LINES_UPPER', :'brokers', 'regress_lines', 'line text', 'text');
SELECT name, relation FROM streamwin.sources WHERE name ILIKE '%lines%' ORDER BY relation::text;
SELECT streamwin.create_query('lines_copy', 'SELECT line FROM "Lines"', start => false);
SELECT name, source FROM streamwin.queries WHERE name = 'lines_copy';
SELECT streamwin.drop_query('lines_copy', drop_result => true);
-- a query of another role reads a source through its view, which needs SELECT
CREATE ROLE sources_other;
GRANT CREATE ON SCHEMA public TO sources_other;
SET ROLE sources_other;
SELECT streamwin.create_query('lines_denied', 'SELECT line FROM lines_upper', start => false);
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM sources_other;
DROP ROLE sources_other;
SELECT streamwin.drop_source('lines_upper');
SELECT streamwin.drop_source('"Lines"');
SELECT name FROM streamwin.sources ORDER BY name;
