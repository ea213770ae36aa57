-- Decoding values: the decoders' own conversions (ISO timestamps, integers,
-- short decimals, text, JSON strings with escapes) must give exactly what
-- the types' input functions and PostgreSQL's JSON parser give for the
-- same text, and refuse exactly what they refuse, with their errors.
--
-- Each message of the fixture topics carries one value, in its column, and
-- its text again in column t.  A transform writes the decoded rows into a
-- table; every check below compares a value with what PostgreSQL makes of
-- t (or of the payload) on its own, so it lists nothing unless they differ.
\getenv brokers KAFKA_BROKERS
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET extra_float_digits = 1;

SELECT streamwin.create_kafka_source('vals_json', :'brokers', 'regress_values',
    't text, ts timestamptz, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, tx text', 'json');
SELECT streamwin.create_kafka_source('vals_csv', :'brokers', 'regress_values_csv',
    't text, ts timestamptz, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, tx text', 'csv');
SELECT streamwin.create_kafka_source('vals_bad', :'brokers', 'regress_values_bad',
    't text, tx text', 'json');
SELECT streamwin.create_query('vj', 'SELECT * FROM vals_json', start => false);
SELECT streamwin.create_query('vc', 'SELECT * FROM vals_csv', start => false);
SELECT streamwin.create_query('vb', 'SELECT * FROM vals_bad', start => false);
SELECT streamwin.run_available(q) - 'offsets' FROM unnest(ARRAY['vj', 'vc', 'vb']) AS q;

-- What a type's input function makes of a text, as text; or its error.
CREATE FUNCTION input_text(t text, typ regtype) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format('SELECT %L::%s::text', t, typ) INTO r;
    RETURN r;
EXCEPTION WHEN others THEN
    RETURN 'ERROR: ' || SQLERRM;
END $$;

-- The decoded rows of both formats with their one value (as text, so that
-- -0 and 0 differ) and the column it is in.
CREATE VIEW decoded AS
SELECT 'json' AS format, * FROM vj UNION ALL SELECT 'csv', * FROM vc;
CREATE VIEW decoded_values AS
SELECT format, t, col, typ, value
FROM decoded,
LATERAL (VALUES ('ts', 'timestamptz'::regtype, ts::text), ('i2', 'int2', i2::text),
                ('i4', 'int4', i4::text), ('i8', 'int8', i8::text),
                ('f4', 'float4', f4::text), ('f8', 'float8', f8::text)) AS v(col, typ, value)
WHERE value IS NOT NULL;

-- how many values of each column each format decoded, which the checks
-- below are over
SELECT format, col, count(*) FROM decoded_values GROUP BY 1, 2 ORDER BY 1, 2;
SELECT format, count(tx) AS texts FROM decoded GROUP BY 1 ORDER BY 1;

-- every value decoded is the one the type's input function reads from the
-- same text: no rows
SELECT format, col, t, value, input_text(t, typ) AS input FROM decoded_values
WHERE value IS DISTINCT FROM input_text(t, typ);

-- every JSON string decoded is what PostgreSQL's JSON parser reads from the
-- same literal: no rows
SELECT t, tx FROM vj WHERE t LIKE '"%' AND tx IS DISTINCT FROM (t::json #>> '{}');
-- a CSV text field is the same text as its copy in t: no rows
SELECT t, tx FROM vc WHERE tx IS NOT NULL AND tx IS DISTINCT FROM t;

-- Every message refused by an input function has that function's error, for
-- the column it names: "same" is true on every row.
CREATE VIEW refused AS
SELECT d.source, d."offset", d.error, v.t, c.col,
       (regexp_match(d.error, '^(.*) \((?:JSON key "|CSV field \d+ \(column ")(\w+)"\)? of the message\)$'))[1] AS message
FROM streamwin.dead_letters d,
LATERAL (SELECT convert_from(d.payload, 'UTF8') AS p) AS pl,
LATERAL (SELECT CASE WHEN d.source = 'vals_json' THEN pl.p::json->>'t'
                     WHEN pl.p LIKE '"%' THEN replace((regexp_match(pl.p, '^"((?:[^"]|"")*)"'))[1], '""', '"')
                     ELSE split_part(pl.p, ',', 1) END) AS v(t),
LATERAL (SELECT (regexp_match(d.error, '(?:JSON key "|\(column ")(\w+)"\)? of the message\)$'))[1]) AS c(col)
WHERE d.source IN ('vals_json', 'vals_csv') AND c.col IS NOT NULL;
SELECT source, "offset", col, t, message,
       'ERROR: ' || message = input_text(t, (CASE col WHEN 'ts' THEN 'timestamptz' WHEN 'i2' THEN 'int2'
            WHEN 'i4' THEN 'int4' WHEN 'i8' THEN 'int8' WHEN 'f4' THEN 'float4' ELSE 'float8' END)::regtype) AS same
FROM refused ORDER BY source, "offset";
-- and the rest of the dead letters: strings without a text form
SELECT source, "offset", error FROM streamwin.dead_letters
WHERE source IN ('vals_json', 'vals_csv') AND ("offset", source) NOT IN (SELECT "offset", source FROM refused)
ORDER BY source, "offset";

-- A byte that is not UTF-8 anywhere in a message makes it a dead letter that
-- says where: "at" is true on every row, and every message is one.
SELECT "offset", position('\xff'::bytea IN payload) - 1 AS bad_byte,
       error = format('invalid byte sequence for encoding "UTF8" at byte %s: 0xff',
                      position('\xff'::bytea IN payload) - 1) AS at
FROM streamwin.dead_letters WHERE source = 'vals_bad' ORDER BY "offset";
SELECT count(*) AS decoded FROM vb;

DROP VIEW refused, decoded_values, decoded;
SELECT streamwin.drop_query(q, true) FROM unnest(ARRAY['vj', 'vc', 'vb']) AS q;
SELECT streamwin.drop_source(s) FROM unnest(ARRAY['vals_json', 'vals_csv', 'vals_bad']) AS s;
DROP FUNCTION input_text(text, regtype);
