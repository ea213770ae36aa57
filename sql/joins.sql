-- Stream-stream joins: two sources joined on an equality and an event-time
-- range.  Results are compared with plain SQL over the same tables (the
-- EXCEPT ALL queries must return nothing, both ways); positions are shown
-- without their LSNs, which differ from run to run.
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

CREATE TABLE imp (imp_id int, ad_id int, imp_time timestamptz, seen_at timestamptz);
CREATE TABLE clk (click_id int, ad_id int, click_time timestamptz, cost numeric);
CREATE TABLE ads (ad_id int PRIMARY KEY, campaign text);
INSERT INTO ads SELECT a, 'campaign ' || a % 3 FROM generate_series(0, 9) a;
SELECT streamwin.create_table_source('impressions', 'imp');
SELECT streamwin.create_table_source('clicks', 'clk');

-- Refused at creation, each saying what to add.
-- no equality between the sides
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$, watermark => '1 minute');
-- no time range: the state would grow forever (unless accepted)
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id$$, watermark => '1 minute');
-- no time range, with a watermark and unbounded state: the watermark has no time
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id$$, watermark => '1 minute', options => '{"join_state_unbounded": true}');
-- no watermark
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$);
-- a range bounded on one end only
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time >= i.imp_time$$, watermark => '1 minute');
-- an outer join without a watermark
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i LEFT JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    options => '{"join_state_unbounded": true}');
-- a window over a side whose range has no end, closed by a watermark
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time >= i.imp_time
    GROUP BY streamwin.tumble(i.imp_time, '1 minute')$$, watermark => '1 minute', output_mode => 'update',
    options => '{"join_state_unbounded": true}');
-- an outer join whose preserved rows have no end to wait for
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i LEFT JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time >= i.imp_time$$, watermark => '1 minute',
    options => '{"join_state_unbounded": true}');
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i FULL JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute');
-- an outer join's ON clause decides alone which rows match
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM ads a JOIN impressions i ON a.ad_id = i.ad_id
    LEFT JOIN clicks c ON c.ad_id = a.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute');
-- a self-join, and three sources
SELECT streamwin.create_query('q', $$SELECT a.imp_id FROM impressions a JOIN impressions b
    ON a.ad_id = b.ad_id AND b.imp_time BETWEEN a.imp_time AND a.imp_time + interval '1 minute'$$,
    watermark => '1 minute');
CREATE TABLE imp2 (LIKE imp);
SELECT streamwin.create_table_source('impressions2', 'imp2');
SELECT streamwin.create_query('q', $$SELECT i.imp_id FROM impressions i
    JOIN clicks c ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '1 minute'
    JOIN impressions2 j ON j.ad_id = i.ad_id AND j.imp_time BETWEEN i.imp_time AND i.imp_time + interval '1 minute'$$,
    watermark => '1 minute');
-- a range that compares two times of one side
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time >= i.imp_time AND c.click_time <= i.seen_at + interval '10 minutes'$$,
    watermark => '1 minute');
-- months have no fixed length
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '1 month'$$,
    watermark => '1 minute');
-- what a join does not support
SELECT streamwin.create_query('q', $$SELECT i.ad_id, count(*) AS n FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY i.ad_id$$, output_mode => 'complete');
-- dedup keys of one side, each named unambiguously
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', dedup_keys => '{ad_id}');
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', dedup_keys => '{i.imp_id, c.click_id}');
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', dedup_keys => '{x.click_id}');
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', options => '{"event_time": "imp_time"}');
SELECT streamwin.create_query('q', $$SELECT i.ad_id, count(*) AS n FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY streamwin.session(i.imp_time, '5 minutes'), i.ad_id$$, watermark => '1 minute');
-- a window over a time the range does not bound
SELECT streamwin.create_query('q', $$SELECT i.ad_id, count(*) AS n FROM impressions i JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY streamwin.tumble(i.seen_at, '5 minutes'), i.ad_id$$, watermark => '1 minute');
-- a window over the time of an outer join's nullable side: an impression
-- without a click has no click time to be in a window of
SELECT streamwin.create_query('q', $$SELECT count(*) AS n FROM impressions i LEFT JOIN clicks c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY streamwin.tumble(c.click_time, '5 minutes')$$, watermark => '1 minute');
-- sources that read timestamps in different zones
CREATE TABLE clk_tokyo (LIKE clk);
SELECT streamwin.create_table_source('clicks_tokyo', 'clk_tokyo', '{"timezone": "Asia/Tokyo"}');
SELECT streamwin.create_query('q', $$SELECT i.imp_id, c.click_id FROM impressions i JOIN clicks_tokyo c
    ON c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute');
SELECT streamwin.drop_source('clicks_tokyo');
SELECT streamwin.drop_source('impressions2');

-- Accepted: an inner join, written out (a transform) and as a windowed
-- count over impressions' time, joined with an ordinary table too; a LEFT
-- and a RIGHT join.  The range holds days too (23 to 25 hours each).
SELECT streamwin.create_query('pairs', $$SELECT i.imp_id, c.click_id, a.campaign, c.click_time - i.imp_time AS delay
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    JOIN ads a ON a.ad_id = i.ad_id$$, watermark => '1 minute', start => false);
SELECT streamwin.create_query('per_ad', $$SELECT i.ad_id, count(*) AS clicks, sum(c.cost) AS cost
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY streamwin.tumble(i.imp_time, '10 minutes'), i.ad_id$$, watermark => '1 minute', start => false);
-- ordinary tables joined around an outer join of the sources
SELECT streamwin.create_query('imp_campaigns', $$SELECT i.imp_id, a.campaign, c.click_id
    FROM ads a JOIN impressions i ON a.ad_id = i.ad_id
    LEFT JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
-- clicks deduplicated before they join (some are sent twice)
SELECT streamwin.create_query('pairs_once', $$SELECT i.imp_id, c.click_id
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', dedup_keys => '{c.click_id}', start => false);
SELECT streamwin.create_query('imp_clicks', $$SELECT i.imp_id, c.click_id
    FROM impressions i LEFT JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('click_imps', $$SELECT c.click_id, count(i.imp_id) AS imps
    FROM impressions i RIGHT JOIN clicks c ON c.ad_id = i.ad_id
    AND i.imp_time BETWEEN c.click_time - interval '1 day' AND c.click_time
    GROUP BY streamwin.tumble(c.click_time, '1 hour'), c.click_id$$,
    watermark => '1 minute', output_mode => 'update', start => false);
-- hop windows (from panes) over the outer join, its unmatched clicks too
SELECT streamwin.create_query('click_imps_hop', $$SELECT c.ad_id % 3 AS g, count(i.imp_id) AS imps,
           count(*) AS n, sum(c.cost) AS cost
    FROM impressions i RIGHT JOIN clicks c ON c.ad_id = i.ad_id
    AND i.imp_time BETWEEN c.click_time - interval '1 day' AND c.click_time
    GROUP BY streamwin.hop(c.click_time, '45 minutes', '15 minutes'), g$$,
    watermark => '1 minute', output_mode => 'update', start => false);
-- an equality alone, without a watermark: each side keeps every row, as asked
SELECT streamwin.create_query('all_pairs', $$SELECT i.imp_id, c.click_id
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id$$,
    options => '{"join_state_unbounded": true}', start => false);
-- The same join in other shapes, whose statements read the batch's pairs
-- as found in C (the plan's "pairs"), an ordinary table between the sides
-- too; and in two shapes whose statements join the sides as SQL does: a
-- side's whole row, and the join under an alias.  Each is compared with
-- plain SQL below.
SELECT streamwin.create_query('pairs_using', $$SELECT ad_id, i.imp_id, c.click_id
    FROM impressions i JOIN clicks c USING (ad_id)
    WHERE c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_swapped', $$SELECT k.iid, c.click_id, c.cost
    FROM clicks c JOIN impressions AS k(iid, aid, itime) ON k.aid = c.ad_id
    AND c.click_time BETWEEN k.itime AND k.itime + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_listed', $$SELECT i.imp_id, c.click_id
    FROM impressions i, clicks c WHERE c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes' AND c.cost > 1$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_rows', $$SELECT i.imp_id, row_to_json(c)::jsonb AS click
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_apart', $$SELECT i.imp_id, a.campaign, c.click_id
    FROM impressions i, ads a, clicks c WHERE a.ad_id = i.ad_id AND c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_aliased', $$SELECT j.click_id, j.ad_id, j.imp_time
    FROM (impressions i JOIN clicks c USING (ad_id)) AS j
    WHERE j.click_time BETWEEN j.imp_time AND j.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
-- hop windows (from panes) over the pairs
SELECT streamwin.create_query('pairs_hop', $$SELECT i.ad_id % 3 AS g, count(*) AS n, sum(c.cost) AS cost
    FROM impressions i JOIN clicks c ON c.ad_id = i.ad_id
    AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
    GROUP BY streamwin.hop(i.imp_time, '30 minutes', '10 minutes'), g$$,
    watermark => '1 minute', output_mode => 'update', start => false);
-- the pairs read through the function (the scan off where it is planned)
SELECT streamwin.create_query('pairs_fn', $$SELECT ad_id, i.imp_id, c.click_id
    FROM impressions i JOIN clicks c USING (ad_id)
    WHERE c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
SELECT name, plan->'join'->>'pairs' AS pairs FROM streamwin.query_catalog
 WHERE plan ? 'join' ORDER BY name;
SELECT name, source, state FROM streamwin.queries ORDER BY name;
-- the sources stay while queries read them
SELECT streamwin.drop_source('clicks');

-- The sides come in turns, each now and then far ahead of the other: all
-- impressions of the first hour, then clicks; a click before its
-- impression; clicks of the next hour before their impressions.
INSERT INTO imp SELECT n, n % 10, '2026-01-01 00:00'::timestamptz + n * interval '1 minute',
       '2026-01-01 00:00'::timestamptz + n * interval '1 minute 10 seconds'
  FROM generate_series(0, 59) n;
-- one of an ad that has no clicks, and one without an ad (a NULL key,
-- which equals nothing; a click below has none either)
INSERT INTO imp VALUES (500, 42, '2026-01-01 00:40'), (502, NULL, '2026-01-01 00:30');
CREATE FUNCTION run_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	q text;
BEGIN
	FOREACH q IN ARRAY array['pairs', 'per_ad', 'imp_campaigns', 'pairs_once', 'imp_clicks', 'click_imps',
                       'click_imps_hop', 'all_pairs', 'pairs_using', 'pairs_swapped', 'pairs_listed',
                       'pairs_rows', 'pairs_apart', 'pairs_aliased', 'pairs_fn', 'pairs_hop'] LOOP
		PERFORM set_config('streamwin.enable_source_scan', (q <> 'pairs_fn')::text, true);
		PERFORM streamwin.run_available(q);
	END LOOP;
END $$;
SELECT run_all();
INSERT INTO clk SELECT n, n % 10, '2026-01-01 00:00'::timestamptz + n * interval '47 seconds', n % 7
  FROM generate_series(0, 79) n;
INSERT INTO clk VALUES (2000, NULL, '2026-01-01 00:31', 1);
SELECT run_all();
INSERT INTO clk SELECT 1000 + n, n % 10, '2026-01-01 01:00'::timestamptz + n * interval '53 seconds', n % 5
  FROM generate_series(0, 79) n
UNION ALL
SELECT 1000 + n, n % 10, '2026-01-01 01:00'::timestamptz + n * interval '53 seconds', n % 5
  FROM generate_series(0, 19) n;
SELECT run_all();
INSERT INTO imp SELECT 100 + n, n % 10, '2026-01-01 01:00'::timestamptz + n * interval '1 minute', NULL
  FROM generate_series(0, 59) n;
-- and clicks that meet them in the same batch
INSERT INTO clk SELECT 4000 + n, n % 10, '2026-01-01 01:30:30'::timestamptz + n * interval '61 seconds', 2
  FROM generate_series(0, 9) n;
-- an impression after the last click, which no click matches
INSERT INTO imp VALUES (501, 9, '2026-01-01 03:00');
SELECT run_all();
-- then every side moves far ahead, so that every range has passed
INSERT INTO imp VALUES (999, 100, '2026-01-03 00:00');
INSERT INTO clk VALUES (9999, 101, '2026-01-03 00:00', 0);
SELECT run_all();

-- Every pair once; every impression without a click, and every click
-- without an impression, once too, with NULLs.
CREATE VIEW want_pairs AS
SELECT i.imp_id, c.click_id, a.campaign, c.click_time - i.imp_time AS delay
  FROM imp i JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
  JOIN ads a ON a.ad_id = i.ad_id;
SELECT count(*) AS pairs FROM want_pairs;
(SELECT * FROM pairs EXCEPT ALL SELECT * FROM want_pairs)
UNION ALL (SELECT * FROM want_pairs EXCEPT ALL SELECT * FROM pairs);
-- every window, each closed once the watermark held back by the range
-- passed its end
-- the clicks sent twice make two pairs each, but once where deduplicated
CREATE VIEW want_pairs_once AS
SELECT i.imp_id, c.click_id
  FROM imp i JOIN (SELECT DISTINCT * FROM clk) c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
SELECT count(*) AS pairs FROM want_pairs_once;
(SELECT * FROM pairs_once EXCEPT ALL SELECT * FROM want_pairs_once)
UNION ALL (SELECT * FROM want_pairs_once EXCEPT ALL SELECT * FROM pairs_once);
CREATE VIEW want_per_ad AS
SELECT streamwin.tumble(i.imp_time, '10 minutes') AS window_start,
       streamwin.tumble(i.imp_time, '10 minutes') + interval '10 minutes' AS window_end,
       i.ad_id, count(*) AS clicks, sum(c.cost) AS cost
  FROM imp i JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
 GROUP BY 1, 2, 3;
SELECT count(*) AS windows FROM want_per_ad;
(SELECT * FROM per_ad EXCEPT ALL SELECT * FROM want_per_ad)
UNION ALL (SELECT * FROM want_per_ad EXCEPT ALL SELECT * FROM per_ad);
CREATE VIEW want_imp_clicks AS
SELECT i.imp_id, c.click_id FROM imp i LEFT JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
 WHERE i.imp_id <> 999;
SELECT count(*) AS rows, count(*) FILTER (WHERE click_id IS NULL) AS unmatched FROM want_imp_clicks;
(SELECT * FROM imp_clicks EXCEPT ALL SELECT * FROM want_imp_clicks)
UNION ALL (SELECT * FROM want_imp_clicks EXCEPT ALL SELECT * FROM imp_clicks);
CREATE VIEW want_imp_campaigns AS
SELECT i.imp_id, a.campaign, c.click_id FROM ads a JOIN imp i ON a.ad_id = i.ad_id
  LEFT JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
SELECT count(*) AS rows, count(*) FILTER (WHERE click_id IS NULL) AS unmatched FROM want_imp_campaigns;
(SELECT * FROM imp_campaigns EXCEPT ALL SELECT * FROM want_imp_campaigns)
UNION ALL (SELECT * FROM want_imp_campaigns EXCEPT ALL SELECT * FROM imp_campaigns);
CREATE VIEW want_click_imps AS
SELECT streamwin.tumble(c.click_time, '1 hour') AS window_start,
       streamwin.tumble(c.click_time, '1 hour') + interval '1 hour' AS window_end,
       c.click_id, count(i.imp_id) AS imps
  FROM imp i RIGHT JOIN clk c ON c.ad_id = i.ad_id
   AND i.imp_time BETWEEN c.click_time - interval '1 day' AND c.click_time
 WHERE c.click_id <> 9999
 GROUP BY 1, 2, 3;
SELECT count(*) AS clicks, count(*) FILTER (WHERE imps = 0) AS unmatched FROM want_click_imps;
(SELECT * FROM click_imps EXCEPT ALL SELECT * FROM want_click_imps)
UNION ALL (SELECT * FROM want_click_imps EXCEPT ALL SELECT * FROM click_imps);
CREATE VIEW want_click_imps_hop AS
SELECT w.start AS window_start, w.start + interval '45 minutes' AS window_end,
       c.ad_id % 3 AS g, count(i.imp_id) AS imps, count(*) AS n, sum(c.cost) AS cost
  FROM imp i RIGHT JOIN clk c ON c.ad_id = i.ad_id
   AND i.imp_time BETWEEN c.click_time - interval '1 day' AND c.click_time
  CROSS JOIN LATERAL (SELECT date_bin('15 minutes', c.click_time, 'epoch') - k * interval '15 minutes'
                        FROM generate_series(0, 2) k) AS w(start)
 WHERE c.click_id <> 9999
 GROUP BY 1, 2, 3;
SELECT count(*) AS windows, sum(n) AS rows, sum(n - imps) AS unmatched FROM want_click_imps_hop;
(SELECT * FROM click_imps_hop EXCEPT ALL SELECT * FROM want_click_imps_hop)
UNION ALL (SELECT * FROM want_click_imps_hop EXCEPT ALL SELECT * FROM click_imps_hop);

-- Every pair of the unbounded join, as plain SQL finds them.
SELECT count(*) AS pairs FROM all_pairs;
(SELECT imp_id, click_id FROM all_pairs
 EXCEPT ALL SELECT i.imp_id, c.click_id FROM imp i JOIN clk c ON c.ad_id = i.ad_id)
UNION ALL
(SELECT i.imp_id, c.click_id FROM imp i JOIN clk c ON c.ad_id = i.ad_id
 EXCEPT ALL SELECT imp_id, click_id FROM all_pairs);

-- The other shapes, as plain SQL finds their rows.
CREATE VIEW want_pairs_using AS
SELECT ad_id, i.imp_id, c.click_id FROM imp i JOIN clk c USING (ad_id)
 WHERE c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
CREATE VIEW want_pairs_swapped AS
SELECT i.imp_id AS iid, c.click_id, c.cost FROM clk c JOIN imp i ON i.ad_id = c.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
CREATE VIEW want_pairs_listed AS
SELECT i.imp_id, c.click_id FROM imp i, clk c WHERE c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes' AND c.cost > 1;
CREATE VIEW want_pairs_rows AS
SELECT i.imp_id, row_to_json(c)::jsonb AS click FROM imp i JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
CREATE VIEW want_pairs_aliased AS
SELECT c.click_id, ad_id, i.imp_time FROM imp i JOIN clk c USING (ad_id)
 WHERE c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
CREATE VIEW want_pairs_hop AS
SELECT w.start AS window_start, w.start + interval '30 minutes' AS window_end,
       i.ad_id % 3 AS g, count(*) AS n, sum(c.cost) AS cost
  FROM imp i JOIN clk c ON c.ad_id = i.ad_id
   AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes'
  CROSS JOIN LATERAL (SELECT date_bin('10 minutes', i.imp_time, 'epoch') - k * interval '10 minutes'
                        FROM generate_series(0, 2) k) AS w(start)
 GROUP BY 1, 2, 3;
CREATE VIEW want_pairs_apart AS
SELECT i.imp_id, a.campaign, c.click_id FROM imp i, ads a, clk c WHERE a.ad_id = i.ad_id
   AND c.ad_id = i.ad_id AND c.click_time BETWEEN i.imp_time AND i.imp_time + interval '10 minutes';
SELECT (SELECT count(*) FROM want_pairs_using) AS using, (SELECT count(*) FROM want_pairs_swapped) AS swapped,
       (SELECT count(*) FROM want_pairs_listed) AS listed, (SELECT count(*) FROM want_pairs_rows) AS rows,
       (SELECT count(*) FROM want_pairs_apart) AS apart, (SELECT count(*) FROM want_pairs_aliased) AS aliased,
       (SELECT sum(n) FROM want_pairs_hop) AS hop_pairs;
-- the rows of each result that the plain SQL does not give, and the other
-- way round: none
CREATE FUNCTION rows_differ(got text, want text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM ((TABLE %1$I EXCEPT ALL TABLE %2$I) UNION ALL '
				   '(TABLE %2$I EXCEPT ALL TABLE %1$I)) d', got, want) INTO n;
	RETURN n;
END $$;
SELECT got, rows_differ(got, want) AS differ
  FROM (VALUES ('pairs_using', 'want_pairs_using'), ('pairs_swapped', 'want_pairs_swapped'),
               ('pairs_listed', 'want_pairs_listed'), ('pairs_rows', 'want_pairs_rows'),
               ('pairs_apart', 'want_pairs_apart'), ('pairs_hop', 'want_pairs_hop'),
               ('pairs_fn', 'want_pairs_using'), ('pairs_aliased', 'want_pairs_aliased')) v(got, want);

-- Many rows of each side with one key among three, in one batch and then
-- against the state: over a million pairs of equal keys a batch, made a
-- chunk at a time, of which the range keeps a few; read by the custom
-- scan (pairs_bulk) and by the source function (pairs_bulk_fn, source
-- scan off), each refill resuming where the last chunk stopped.
CREATE TABLE ba (id int, k int, t timestamptz);
CREATE TABLE bb (id int, k int, t timestamptz);
SELECT streamwin.create_table_source('bulk_a', 'ba');
SELECT streamwin.create_table_source('bulk_b', 'bb');
SELECT streamwin.create_query('pairs_bulk', $$SELECT a.id AS a_id, b.id AS b_id
    FROM bulk_a a JOIN bulk_b b ON b.k = a.k AND b.t BETWEEN a.t AND a.t + interval '1 minute'$$,
    watermark => '1 minute', start => false);
SELECT streamwin.create_query('pairs_bulk_fn', $$SELECT a.id AS a_id, b.id AS b_id
    FROM bulk_a a JOIN bulk_b b ON b.k = a.k AND b.t BETWEEN a.t AND a.t + interval '1 minute'$$,
    watermark => '1 minute', start => false);
SELECT name, plan->'join'->>'pairs' AS pairs FROM streamwin.query_catalog
 WHERE name IN ('pairs_bulk', 'pairs_bulk_fn') ORDER BY 1;
CREATE FUNCTION run_bulk() RETURNS TABLE (q text, input_rows jsonb) LANGUAGE plpgsql AS $$
BEGIN
	FOREACH q IN ARRAY ARRAY['pairs_bulk', 'pairs_bulk_fn'] LOOP
		PERFORM set_config('streamwin.enable_source_scan', (q = 'pairs_bulk')::text, true);
		input_rows := streamwin.run_available(q) -> 'input_rows';
		RETURN NEXT;
	END LOOP;
END $$;
INSERT INTO ba SELECT n, n % 3, '2026-01-01 00:00'::timestamptz + n * interval '1.7 seconds'
  FROM generate_series(0, 1999) n;
INSERT INTO bb SELECT n, n % 3, '2026-01-01 00:00'::timestamptz + n * interval '1.9 seconds'
  FROM generate_series(0, 1999) n;
SELECT * FROM run_bulk();
INSERT INTO ba SELECT n, n % 3, '2026-01-01 01:00'::timestamptz + (n - 2000) * interval '1.3 seconds'
  FROM generate_series(2000, 2999) n;
INSERT INTO bb SELECT n, n % 3, '2026-01-01 01:03'::timestamptz + (n - 2000) * interval '1.1 seconds'
  FROM generate_series(2000, 2999) n;
SELECT * FROM run_bulk();
CREATE VIEW want_pairs_bulk AS
SELECT a.id AS a_id, b.id AS b_id FROM ba a JOIN bb b ON b.k = a.k AND b.t BETWEEN a.t AND a.t + interval '1 minute';
SELECT count(*) AS pairs FROM want_pairs_bulk;
SELECT got, rows_differ(got, 'want_pairs_bulk') AS differ FROM unnest(ARRAY['pairs_bulk', 'pairs_bulk_fn']) got;
DROP VIEW want_pairs_bulk;
DROP FUNCTION run_bulk();
SELECT streamwin.drop_query('pairs_bulk', drop_result => true);
SELECT streamwin.drop_query('pairs_bulk_fn', drop_result => true);
SELECT streamwin.drop_source('bulk_a');
SELECT streamwin.drop_source('bulk_b');
DROP TABLE ba, bb;

-- Only the rows that can still match stay: the two far ahead.
SELECT q, (SELECT state_rows FROM streamwin.progress p WHERE p.query = q ORDER BY batch_id DESC LIMIT 1)
  FROM unnest(array['pairs', 'imp_clicks']) q;
SELECT qs.source_index, s.name, qs.join_table::text ~ '^streamwin\.join_(left|right)_[0-9]+$' AS join_table
  FROM streamwin.query_sources qs JOIN streamwin.query_catalog q USING (query_id)
  JOIN streamwin.source_catalog s USING (source_id)
 WHERE q.name = 'pairs' ORDER BY 1;
-- progress shows each source's positions under its name
SELECT jsonb_object_keys(offsets) FROM streamwin.progress WHERE query = 'pairs' ORDER BY batch_id DESC, 1 LIMIT 2;

-- reset_query takes each source's offsets under its name
SELECT streamwin.reset_query('pairs', '{"nosuch": {"lsn": "0/0"}}');
SELECT streamwin.reset_query('pairs', '{"clicks": 5}');
SELECT streamwin.reset_query('pairs', '{"CLICKS": 5}');
SELECT streamwin.reset_query('pairs', '{"clicks": {"lsn": "0/0"}, "CLICKS": {"lsn": "0/0"}}');
SELECT streamwin.reset_query('pairs', 'latest');
SELECT streamwin.run_batch('pairs') -> 'input_rows' AS input_rows;

SELECT streamwin.drop_query(q, drop_result => true)
  FROM unnest(array['pairs', 'per_ad', 'imp_campaigns', 'pairs_once', 'imp_clicks', 'click_imps',
                     'click_imps_hop', 'all_pairs', 'pairs_using', 'pairs_swapped', 'pairs_listed',
                     'pairs_rows', 'pairs_apart', 'pairs_aliased', 'pairs_fn', 'pairs_hop']) q;
SELECT count(*) FROM pg_class WHERE relname ~ '^(checkpoint_)?join_';
SELECT streamwin.drop_source('clicks');
SELECT streamwin.drop_source('impressions');
DROP FUNCTION run_all(), rows_differ(text, text);
DROP VIEW want_pairs, want_pairs_once, want_per_ad, want_imp_clicks, want_imp_campaigns, want_click_imps,
     want_click_imps_hop, want_pairs_using, want_pairs_swapped, want_pairs_listed, want_pairs_rows,
     want_pairs_apart, want_pairs_aliased, want_pairs_hop;
DROP TABLE imp, imp2, clk, clk_tokyo, ads;

-- Dedup of a join side whose time is a timestamp without zone, read in a
-- zone west of UTC: a key is kept until the watermark passes its time read
-- in that zone, so a repeat of click 7 in the next batch is dropped (its
-- time had been read as UTC, five hours early, and the key forgotten).
CREATE TABLE dj_imp (imp_id int, t timestamp);
CREATE TABLE dj_clk (click_id int, imp_id int, t timestamp);
SELECT streamwin.create_table_source('dj_imps', 'dj_imp', '{"timezone": "America/New_York"}');
SELECT streamwin.create_table_source('dj_clks', 'dj_clk', '{"timezone": "America/New_York"}');
SELECT streamwin.create_query('dj',
    $$SELECT i.imp_id, c.click_id FROM dj_imps i JOIN dj_clks c
        ON c.imp_id = i.imp_id AND c.t BETWEEN i.t AND i.t + interval '10 minutes'$$,
    watermark => '1 hour', dedup_keys => '{c.click_id}', start => false);
INSERT INTO dj_imp VALUES (1, '2024-01-01 10:00'), (2, '2024-01-01 10:05');
INSERT INTO dj_clk VALUES (7, 1, '2024-01-01 10:01');
SELECT streamwin.run_batch('dj') -> 'input_rows' AS input_rows;
INSERT INTO dj_clk VALUES (7, 1, '2024-01-01 10:01'), (8, 2, '2024-01-01 10:06');
SELECT streamwin.run_batch('dj') -> 'input_rows' AS input_rows;
SELECT imp_id, click_id, count(*) AS times FROM dj GROUP BY 1, 2 ORDER BY 1, 2;
SELECT streamwin.drop_query('dj', drop_result => true);
SELECT streamwin.drop_source('dj_clks');
SELECT streamwin.drop_source('dj_imps');
DROP TABLE dj_imp, dj_clk;

-- A range over times without zone in a zone that changes its offset: on
-- 2023-11-05 New York's clocks go back from 02:00 EDT to 01:00 EST.
-- Impression 1 at 00:55 EDT and click 10 at 01:05 EST are ten minutes apart
-- on the clock, as the range compares them, but seventy as instants: the
-- impression waits for the click past the ten minutes, though the rows of
-- the first batch moved the watermark to 01:01 EST.
CREATE TABLE dst_imp (imp_id int, t timestamp);
CREATE TABLE dst_clk (click_id int, imp_id int, t timestamp);
SELECT streamwin.create_table_source('dst_imps', 'dst_imp', '{"timezone": "America/New_York"}');
SELECT streamwin.create_table_source('dst_clks', 'dst_clk', '{"timezone": "America/New_York"}');
SELECT streamwin.create_query('dst_pairs',
    $$SELECT i.imp_id, c.click_id FROM dst_imps i JOIN dst_clks c
        ON c.imp_id = i.imp_id AND c.t BETWEEN i.t AND i.t + interval '10 minutes'$$,
    watermark => '1 minute', start => false);
INSERT INTO dst_imp VALUES (1, '2023-11-05 00:55'), (2, '2023-11-05 01:02');
INSERT INTO dst_clk VALUES (20, 2, '2023-11-05 01:02');
SELECT streamwin.run_batch('dst_pairs') -> 'input_rows' AS input_rows;
INSERT INTO dst_clk VALUES (10, 1, '2023-11-05 01:05');
SELECT streamwin.run_batch('dst_pairs') -> 'input_rows' AS input_rows;
SELECT imp_id, click_id FROM dst_pairs ORDER BY 1, 2;
SELECT count(*) AS diffs FROM (
  (SELECT imp_id, click_id FROM dst_pairs
   EXCEPT ALL
   SELECT i.imp_id, c.click_id FROM dst_imp i JOIN dst_clk c
     ON c.imp_id = i.imp_id AND c.t BETWEEN i.t AND i.t + interval '10 minutes')
  UNION ALL
  (SELECT i.imp_id, c.click_id FROM dst_imp i JOIN dst_clk c
     ON c.imp_id = i.imp_id AND c.t BETWEEN i.t AND i.t + interval '10 minutes'
   EXCEPT ALL
   SELECT imp_id, click_id FROM dst_pairs)) d;
SELECT streamwin.drop_query('dst_pairs', drop_result => true);
SELECT streamwin.drop_source('dst_clks');
SELECT streamwin.drop_source('dst_imps');
DROP TABLE dst_imp, dst_clk;

-- A table the query joins changes a column's type.  PostgreSQL parses the
-- query's statements again: an aggregation whose state keeps the old type
-- is refused at its next batch (its store took the new values for the old
-- type's), until the column is changed back; a transform's result takes
-- the new values as an INSERT would, coerced to its columns' types.
CREATE TABLE lk_evt (id int, cust int, amount float8);
CREATE TABLE lk_cust (id int PRIMARY KEY, segment text, rate float8);
INSERT INTO lk_cust VALUES (1, 'gold', 1.5), (2, 'silver', 2.25);
SELECT streamwin.create_table_source('lk_events', 'lk_evt');
SELECT streamwin.create_query('lk_by_segment',
    $$SELECT c.segment, count(*) AS n, sum(e.amount * c.rate) AS total
      FROM lk_events e JOIN lk_cust c ON c.id = e.cust GROUP BY c.segment$$,
    output_mode => 'update', start => false);
SELECT streamwin.create_query('lk_rows',
    $$SELECT e.id, c.segment, c.rate FROM lk_events e JOIN lk_cust c ON c.id = e.cust$$,
    start => false);
INSERT INTO lk_evt VALUES (1, 1, 10), (2, 2, 20), (3, 1, 30);
SELECT streamwin.run_batch('lk_by_segment') -> 'input_rows' AS input_rows;
SELECT streamwin.run_batch('lk_rows') -> 'input_rows' AS input_rows;
CREATE TYPE lk_segment AS ENUM ('gold', 'silver');
ALTER TABLE lk_cust ALTER segment TYPE lk_segment USING segment::lk_segment;
INSERT INTO lk_evt VALUES (4, 2, 40), (5, 1, 50);
SELECT streamwin.run_batch('lk_by_segment') -> 'input_rows' AS input_rows;
SELECT streamwin.run_batch('lk_rows') -> 'input_rows' AS input_rows;
ALTER TABLE lk_cust ALTER segment TYPE text, ALTER rate TYPE numeric;
SELECT streamwin.run_batch('lk_by_segment') -> 'input_rows' AS input_rows;
ALTER TABLE lk_cust ALTER rate TYPE float8;
SELECT streamwin.run_batch('lk_by_segment') -> 'input_rows' AS input_rows;
-- a type of the same values (varchar for text) goes on
ALTER TABLE lk_cust ALTER segment TYPE varchar(20);
INSERT INTO lk_evt VALUES (6, 2, 60);
SELECT streamwin.run_batch('lk_by_segment') -> 'input_rows' AS input_rows;
SELECT streamwin.run_batch('lk_rows') -> 'input_rows' AS input_rows;
SELECT * FROM lk_by_segment ORDER BY segment;
SELECT * FROM lk_rows ORDER BY id;
SELECT count(*) AS diffs FROM (
  (SELECT segment, n, total FROM lk_by_segment
   EXCEPT ALL
   SELECT c.segment, count(*), sum(e.amount * c.rate) FROM lk_evt e JOIN lk_cust c ON c.id = e.cust GROUP BY c.segment)
  UNION ALL
  (SELECT c.segment, count(*), sum(e.amount * c.rate) FROM lk_evt e JOIN lk_cust c ON c.id = e.cust GROUP BY c.segment
   EXCEPT ALL
   SELECT segment, n, total FROM lk_by_segment)) d;
SELECT count(*) AS diffs FROM (
  (SELECT id, segment, rate FROM lk_rows
   EXCEPT ALL
   SELECT e.id, c.segment, c.rate FROM lk_evt e JOIN lk_cust c ON c.id = e.cust)
  UNION ALL
  (SELECT e.id, c.segment, c.rate FROM lk_evt e JOIN lk_cust c ON c.id = e.cust
   EXCEPT ALL
   SELECT id, segment, rate FROM lk_rows)) d;
SELECT streamwin.drop_query('lk_by_segment', drop_result => true);
SELECT streamwin.drop_query('lk_rows', drop_result => true);
SELECT streamwin.drop_source('lk_events');
DROP TABLE lk_evt, lk_cust;
DROP TYPE lk_segment;

-- A group key and a min() from a joined table's value stored out of line
-- (TOAST): the store keeps the value, not a pointer into the joined
-- table's TOAST, which an update and a vacuum of that row take away.
CREATE TABLE tx_evt (id int, pid int);
CREATE TABLE tx_prod (id int PRIMARY KEY, description text);
ALTER TABLE tx_prod ALTER COLUMN description SET STORAGE EXTERNAL;
INSERT INTO tx_prod VALUES (1, repeat('x', 5000));
SELECT streamwin.create_table_source('tx_events', 'tx_evt');
SELECT streamwin.create_query('tx_by_desc',
  $$SELECT d.description, count(*) AS n, min(d.description) AS lo
      FROM tx_events e JOIN tx_prod d ON d.id = e.pid GROUP BY d.description$$,
  output_mode => 'update', start => false);
INSERT INTO tx_evt VALUES (1, 1);
SELECT (streamwin.run_batch('tx_by_desc')->>'input_rows')::int AS input_rows;
UPDATE tx_prod SET description = repeat('x', 5000) WHERE id = 1;
VACUUM tx_prod;
INSERT INTO tx_evt VALUES (2, 1);
SELECT (streamwin.run_batch('tx_by_desc')->>'input_rows')::int AS input_rows;
SELECT length(description) AS len, n, length(lo) AS lo_len FROM tx_by_desc;
SELECT streamwin.drop_query('tx_by_desc', drop_result => true);
SELECT streamwin.drop_source('tx_events');
DROP TABLE tx_evt, tx_prod;
