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
SELECT name, kind, topic, format, columns, options, relation FROM streamwin.sources;

-- csv and text formats
SELECT streamwin.create_kafka_source('lines_csv', :'brokers', 'regress_lines',
    'id int, region text, at timestamptz', format => 'csv');
SELECT streamwin.create_kafka_source('lines_raw', :'brokers', 'regress_lines',
    'line text', format => 'text', options => '{"starting_offsets": "latest"}');

-- mistakes are refused with a hint
SELECT streamwin.create_kafka_source('orders', :'brokers', 'x', 'a int');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', format => 'avro');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, b');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int) INHERITS (orders');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int PRIMARY KEY');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int, a text');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a no_such_type');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a text, b text', format => 'text');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"starting_offset": "earliest"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"starting_offsets": "yesterday"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"partitions": "all"}');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"max_records_per_batch": 0}');
SELECT streamwin.create_kafka_source('bad', '', 'x', 'a int');
SELECT streamwin.create_kafka_source('bad', :'brokers', 'x', 'a int', options => '{"kafka": {"enable.auto.commit": "true"}}');
SELECT count(*) AS no_leftovers FROM pg_class WHERE relname = 'bad';

-- librdkafka properties (credentials, say) are shown to the owner only
SELECT streamwin.create_kafka_source('secured', :'brokers', 'regress_orders', 'v text', 'text',
    '{"kafka": {"sasl.username": "app", "sasl.password": "s3cret"}}');
CREATE ROLE streamwin_other LOGIN;
SELECT options FROM streamwin.sources WHERE name = 'secured';
SET ROLE streamwin_other;
SELECT options FROM streamwin.sources WHERE name = 'secured';
-- and only the owner may drop a source
SELECT streamwin.drop_source('secured');
RESET ROLE;
DROP ROLE streamwin_other;

-- a source read by a query cannot be dropped
SELECT streamwin.create_query('lines_per_region', 'SELECT region, count(*) AS n FROM lines_csv GROUP BY region',
    output_mode => 'update', start => false);
SELECT streamwin.drop_source('lines_csv');
SELECT streamwin.drop_query('lines_per_region', drop_result => true);

SELECT streamwin.drop_source('secured');
SELECT streamwin.drop_source('lines_raw');
SELECT streamwin.drop_source('lines_csv');
SELECT streamwin.drop_source('no_such_source');
SELECT name FROM streamwin.sources ORDER BY name;
