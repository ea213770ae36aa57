-- How a transform's rows reach its result table.  As long as the result is
-- a plain table they are written as COPY writes them: many rows to a page,
-- one WAL record per page (a heap multi-insert) rather than one per row.
-- A result someone has given a trigger or a column with a default gets them
-- through its INSERT, which runs what the table asks for; a constraint
-- refuses a row either way.  Every result is compared with plain SQL over
-- the source table (the EXCEPT queries must return nothing).
SET timezone = 'UTC';
-- each batch's WAL flushed at its commit, for pg_walinspect to read
SET synchronous_commit = on;
CREATE EXTENSION pg_walinspect;

CREATE TABLE pages (id int, v int);
SELECT streamwin.create_table_source('pages_src', 'pages');
SELECT streamwin.create_query('pages_copy', 'SELECT id, v FROM pages_src', start => false);

-- the WAL records written for the result table since an LSN, by kind
-- (once the batch has committed: pg_walinspect reads flushed WAL)
CREATE FUNCTION result_records(since pg_lsn, query text, OUT row_records bigint, OUT page_records bigint)
LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE r.record_type IN ('INSERT', 'INSERT+INIT')),
         count(*) FILTER (WHERE r.record_type IN ('MULTI_INSERT', 'MULTI_INSERT+INIT'))
    FROM pg_get_wal_records_info(since, pg_current_wal_flush_lsn()) r
   WHERE r.block_ref LIKE '% rel %/%/' || pg_relation_filenode(query::regclass) || ' %'
$$;

INSERT INTO pages SELECT g, g * 2 FROM generate_series(1, 1000) g;
SELECT pg_current_wal_insert_lsn() AS since \gset
SELECT (streamwin.run_batch('pages_copy'))->'input_rows' AS input_rows;
SELECT row_records, page_records BETWEEN 1 AND 20 AS a_few_page_records FROM result_records(:'since', 'pages_copy');
SELECT * FROM pages EXCEPT ALL SELECT * FROM pages_copy;
SELECT * FROM pages_copy EXCEPT ALL SELECT * FROM pages;

-- A trigger on the result: the INSERT writes the rows, and the trigger
-- sees each of them.
CREATE FUNCTION negate_v() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.v := -NEW.v; RETURN NEW; END $$;
CREATE TRIGGER negate_v BEFORE INSERT ON pages_copy FOR EACH ROW EXECUTE FUNCTION negate_v();
INSERT INTO pages SELECT g, g * 2 FROM generate_series(1001, 1010) g;
SELECT pg_current_wal_insert_lsn() AS since \gset
SELECT (streamwin.run_batch('pages_copy'))->'input_rows' AS input_rows;
SELECT row_records, page_records FROM result_records(:'since', 'pages_copy');
SELECT id, -v AS v FROM pages_copy WHERE id > 1000 EXCEPT ALL SELECT * FROM pages WHERE id > 1000;
SELECT * FROM pages WHERE id > 1000 EXCEPT ALL SELECT id, -v FROM pages_copy WHERE id > 1000;
DROP TRIGGER negate_v ON pages_copy;

-- A column the query does not write, with a default: the INSERT fills it in.
ALTER TABLE pages_copy ADD COLUMN note text DEFAULT 'from the default';
INSERT INTO pages SELECT g, g * 2 FROM generate_series(1011, 1020) g;
SELECT pg_current_wal_insert_lsn() AS since \gset
SELECT (streamwin.run_batch('pages_copy'))->'input_rows' AS input_rows;
SELECT row_records, page_records FROM result_records(:'since', 'pages_copy');
SELECT note, count(*), min(id), max(id) FROM pages_copy WHERE id > 1010 GROUP BY note;
ALTER TABLE pages_copy DROP COLUMN note;

-- A column of a domain with a default, which the query does not write:
-- the INSERT gives it the domain's default (and checks the domain).
CREATE DOMAIN page_tag AS text DEFAULT 'from the domain' CHECK (VALUE <> '');
ALTER TABLE pages_copy ADD COLUMN tag page_tag;
INSERT INTO pages SELECT g, g * 2 FROM generate_series(1031, 1040) g;
SELECT pg_current_wal_insert_lsn() AS since \gset
SELECT (streamwin.run_batch('pages_copy'))->'input_rows' AS input_rows;
SELECT row_records, page_records FROM result_records(:'since', 'pages_copy');
SELECT tag, count(*), min(id), max(id) FROM pages_copy WHERE id > 1030 GROUP BY tag;
ALTER TABLE pages_copy DROP COLUMN tag;
DROP DOMAIN page_tag;

-- Plain again: back to a record per page.  A CHECK constraint refuses a
-- row (id 1025) as the INSERT would; the batch fails whole and writes
-- nothing, and once the constraint is gone the next batch writes every row.
ALTER TABLE pages_copy ADD CONSTRAINT not_1025 CHECK (id <> 1025);
INSERT INTO pages SELECT g, g * 2 FROM generate_series(1021, 1030) g;
SELECT streamwin.run_batch('pages_copy');
SELECT count(*) AS rows_after_the_failed_batch FROM pages_copy;
ALTER TABLE pages_copy DROP CONSTRAINT not_1025;
SELECT pg_current_wal_insert_lsn() AS since \gset
SELECT (streamwin.run_batch('pages_copy'))->'input_rows' AS input_rows;
SELECT row_records, page_records BETWEEN 1 AND 20 AS a_few_page_records FROM result_records(:'since', 'pages_copy');
-- (the trigger negated v in rows 1001 to 1010)
SELECT id, CASE WHEN id BETWEEN 1001 AND 1010 THEN -v ELSE v END FROM pages_copy
EXCEPT ALL SELECT * FROM pages;
SELECT * FROM pages EXCEPT ALL
SELECT id, CASE WHEN id BETWEEN 1001 AND 1010 THEN -v ELSE v END FROM pages_copy;

SELECT streamwin.drop_query('pages_copy', drop_result => true);
SELECT streamwin.drop_source('pages_src');
DROP TABLE pages;
DROP FUNCTION result_records(pg_lsn, text);
DROP FUNCTION negate_v();
DROP EXTENSION pg_walinspect;

-- A result table or a source's view renamed or dropped by hand: each batch
-- says which, and what to do, rather than fail on the name its statements
-- give it; nothing is lost while it fails, and with the name back the
-- query goes on exactly.
CREATE TABLE visits (id int PRIMARY KEY, page int);
SELECT streamwin.create_table_source('visits_src', 'visits');
SELECT streamwin.create_query('visit_counts', 'SELECT page, count(*) AS n FROM visits_src GROUP BY page',
                              output_mode => 'update', start => false);
INSERT INTO visits SELECT g, g % 3 FROM generate_series(1, 30) g;
SELECT (streamwin.run_batch('visit_counts'))->'input_rows' AS input_rows;
ALTER TABLE visit_counts RENAME TO visit_totals;
INSERT INTO visits SELECT g, g % 4 FROM generate_series(31, 50) g;
SELECT streamwin.run_batch('visit_counts');
-- (a new session's runner checks before it prepares the statements)
\c
SELECT streamwin.run_batch('visit_counts');
CREATE SCHEMA elsewhere;
ALTER TABLE visit_totals SET SCHEMA elsewhere;
ALTER TABLE elsewhere.visit_totals RENAME TO visit_counts;
SELECT streamwin.run_batch('visit_counts');
ALTER TABLE elsewhere.visit_counts SET SCHEMA public;
ALTER VIEW visits_src RENAME TO visits_view;
SELECT streamwin.run_batch('visit_counts');
ALTER VIEW visits_view RENAME TO visits_src;
SELECT (streamwin.run_batch('visit_counts'))->'input_rows' AS input_rows;
SELECT page, n FROM visit_counts EXCEPT ALL SELECT page, count(*) FROM visits GROUP BY page;
SELECT page, count(*) FROM visits GROUP BY page EXCEPT ALL SELECT page, n FROM visit_counts;
-- The names are compared by what they name, not by their quoting, which
-- quote_all_identifiers changes: a query created with it on runs with it
-- off, and the other way round.
SET quote_all_identifiers = on;
SELECT streamwin.create_query('visit_quoted', 'SELECT page, count(*) AS n FROM visits_src GROUP BY page',
                              output_mode => 'update', start => false);
RESET quote_all_identifiers;
SELECT (streamwin.run_batch('visit_quoted'))->'input_rows' AS input_rows;
SET quote_all_identifiers = on;
SELECT (streamwin.run_batch('visit_counts'))->'input_rows' AS input_rows;
RESET quote_all_identifiers;
SELECT streamwin.drop_query('visit_quoted', drop_result => true);
-- (each in the session whose runner read it, and in a new one)
DROP TABLE visit_counts;
SELECT streamwin.run_batch('visit_counts');
\c
SELECT streamwin.run_batch('visit_counts');
SELECT streamwin.drop_query('visit_counts');
SELECT streamwin.create_query('visit_pages', 'SELECT id, page FROM visits_src', start => false);
SELECT (streamwin.run_batch('visit_pages'))->'input_rows' AS input_rows;
DROP VIEW visits_src;
SELECT streamwin.run_batch('visit_pages');
\c
SELECT streamwin.run_batch('visit_pages');
SELECT streamwin.drop_query('visit_pages', drop_result => true);
SELECT streamwin.drop_source('visits_src');
DROP TABLE visits;
DROP SCHEMA elsewhere;
