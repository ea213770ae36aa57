/*-------------------------------------------------------------------------
 *
 * kafka_produce.c
 *	  Produce stdin, one message per line, to a Kafka topic.
 *
 * Used by streamwin's tests, the demo and the benchmarks to feed a topic on
 * the test broker (test/kafka_broker) or on any real cluster.  It must never
 * lose a message silently: a test that counts results relies on every line
 * having reached the broker, so the exit status is 0 only when every message
 * was acknowledged.
 *
 * Usage:
 *	  kafka_produce --brokers B --topic T [--partition N | --partition-prefix]
 *					[--key-prefix] [--header-prefix] [--null MARKER]
 *					[--rate MSGS_PER_SEC] [--linger-ms N]
 *					[--batch-num-messages N] [-X PROPERTY=VALUE]... [--quiet]
 *
 * Each line of stdin (without its newline) is one message value.  With
 * --partition-prefix a line is "PARTITION<TAB>payload"; with --key-prefix
 * it is "KEY<TAB>payload" (both together: "PARTITION<TAB>KEY<TAB>payload");
 * with --header-prefix the headers come next: "NAME=VALUE;NAME=VALUE<TAB>"
 * (an empty field: no headers; "NAME" without "=": a header with no value).
 * With --null MARKER, a key or payload that is exactly MARKER is null: a
 * message without a key, or with a null value (a tombstone).  With --hex,
 * a payload is written in hexadecimal digits, two per byte, so that binary
 * values (Avro) fit on a line; so is a key, with --key-prefix.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define PROGNAME "kafka_produce"
#include "test_util.h"

/* Delivery report bookkeeping, updated by dr_msg_cb in our own thread. */
static int64_t delivered = 0;
static int64_t failed = 0;
static char first_failure[512];

/* The value of a hexadecimal digit, or -1 */
static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Hexadecimal digits decoded in place (each byte where its two digits were); the new length */
static size_t
unhex(char *s, size_t len, int64_t lineno)
{
	if (len % 2 != 0)
		die("line %" PRId64 ": odd number of hexadecimal digits", lineno);
	for (size_t i = 0; i < len / 2; i++)
	{
		int			hi = hex_digit(s[2 * i]);
		int			lo = hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			die("line %" PRId64 ": not hexadecimal", lineno);
		s[i] = (char) (hi << 4 | lo);
	}
	return len / 2;
}

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: %s --brokers B --topic T [options] < lines\n"
			"\n"
			"Produces each line of stdin (newline stripped) as one message.\n"
			"\n"
			"Options:\n"
			"  --brokers B               bootstrap servers, host:port[,host:port...]\n"
			"  --topic T                 topic to produce to\n"
			"  --partition N             send every message to partition N\n"
			"  --partition-prefix        each line is PARTITION<TAB>payload\n"
			"  --key-prefix              each line is KEY<TAB>payload; keyed messages\n"
			"                            are placed by the default partitioner\n"
			"                            (CRC32 of the key)\n"
			"  --header-prefix           then HEADERS<TAB>: NAME=VALUE;NAME=VALUE, empty\n"
			"                            for none, NAME alone for a header without value\n"
			"  --null MARKER             a key or payload that is exactly MARKER is null\n"
			"                            (no key; a null value, a tombstone)\n"
			"  --hex                     payloads are hexadecimal, two digits per byte\n"
			"  --rate MSGS_PER_SEC       pace production to this many messages per\n"
			"                            second (default: as fast as possible)\n"
			"  --linger-ms N             linger.ms (default 5)\n"
			"  --batch-num-messages N    batch.num.messages (default 10000)\n"
			"  -X PROPERTY=VALUE         any other librdkafka producer property\n"
			"  --quiet                   do not print the final count\n"
			"  --help                    show this help\n"
			"\n"
			"Without --partition, --partition-prefix or --key-prefix, messages have\n"
			"no key and librdkafka's default partitioner (consistent_random) sends\n"
			"them to a random partition that changes only every\n"
			"sticky.partitioning.linger.ms (10 ms): a fast burst spreads unevenly,\n"
			"possibly all onto one partition.  Use --partition-prefix (or keys) when\n"
			"a test needs a known spread.\n"
			"With --partition-prefix and --key-prefix together, a line is\n"
			"PARTITION<TAB>KEY<TAB>payload (and with --header-prefix,\n"
			"PARTITION<TAB>KEY<TAB>HEADERS<TAB>payload).\n"
			"\n"
			"Exits 0 only if every message was acknowledged by the broker (acks=all),\n"
			"each written once (enable.idempotence);\n"
			"prints \"produced N messages\" on stderr at the end unless --quiet.\n",
			PROGNAME);
}




/*
 * Delivery report callback.  It runs inside rd_kafka_poll()/rd_kafka_flush()
 * on the main thread, so plain globals are fine.
 */
static void
dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
		delivered++;
	else
	{
		if (failed == 0)
			snprintf(first_failure, sizeof(first_failure),
					 "partition %" PRId32 ": %s", msg->partition,
					 rd_kafka_err2str(msg->err));
		failed++;
	}
}

/*
 * Broker-level errors (connection refused and the like).  librdkafka retries
 * these by itself, so they are only reported; a message that finally cannot
 * be delivered shows up as a failed delivery report.
 */
static void
error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	/* librdkafka already logs transport errors as "FAIL" lines. */
	if (err == RD_KAFKA_RESP_ERR__TRANSPORT)
		return;
	fprintf(stderr, "%s: %s%s\n", PROGNAME,
			rd_kafka_fatal_error(rk, NULL, 0) ? "fatal: " : "", reason);
}

static void
timespec_add_ns(struct timespec *ts, int64_t ns)
{
	ns += ts->tv_nsec;
	ts->tv_sec += ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
}

/* "NAME=VALUE;NAME=VALUE" (NAME alone: no value) as headers; NULL if empty. */
static rd_kafka_headers_t *
parse_headers(char *field)
{
	rd_kafka_headers_t *headers;
	char	   *next;

	if (*field == '\0')
		return NULL;
	headers = rd_kafka_headers_new(4);
	for (char *h = field; h != NULL; h = next)
	{
		char	   *eq;

		next = strchr(h, ';');
		if (next != NULL)
			*next++ = '\0';
		eq = strchr(h, '=');
		if (eq != NULL)
			*eq++ = '\0';
		if (rd_kafka_header_add(headers, h, -1, eq, eq ? -1 : 0) != RD_KAFKA_RESP_ERR_NO_ERROR)
			die("could not add header \"%s\"", h);
	}
	return headers;
}

/* Split off the text up to the first tab; returns NULL if there is none. */
static char *
split_tab(char **rest, size_t *restlen)
{
	char	   *field = *rest;
	char	   *tab = memchr(field, '\t', *restlen);

	if (tab == NULL)
		return NULL;
	*tab = '\0';
	*restlen -= (tab + 1) - field;
	*rest = tab + 1;
	return field;
}

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"brokers", required_argument, NULL, 'b'},
		{"topic", required_argument, NULL, 't'},
		{"partition", required_argument, NULL, 'p'},
		{"partition-prefix", no_argument, NULL, 'P'},
		{"key-prefix", no_argument, NULL, 'K'},
		{"header-prefix", no_argument, NULL, 'H'},
		{"null", required_argument, NULL, 'N'},
		{"rate", required_argument, NULL, 'r'},
		{"linger-ms", required_argument, NULL, 'l'},
		{"batch-num-messages", required_argument, NULL, 'n'},
		{"quiet", no_argument, NULL, 'q'},
		{"hex", no_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *brokers = NULL;
	const char *topic_name = NULL;
	int32_t		fixed_partition = RD_KAFKA_PARTITION_UA;
	int			partition_prefix = 0;
	int			key_prefix = 0;
	int			header_prefix = 0;
	int			hex = 0;
	const char *null_marker = NULL;
	double		rate = 0;
	const char *linger_ms = "5";
	const char *batch_num_messages = "10000";
	int			quiet = 0;
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	char		errstr[512];
	char	   *line = NULL;
	size_t		linecap = 0;
	ssize_t		linelen;
	int64_t		lineno = 0;
	int64_t		produced = 0;
	struct timespec start;
	int			opt;
	int			flush_rounds;

	conf = rd_kafka_conf_new();

	while ((opt = getopt_long(argc, argv, "X:h", long_options, NULL)) != -1)
	{
		switch (opt)
		{
			case 'b':
				brokers = optarg;
				break;
			case 't':
				topic_name = optarg;
				break;
			case 'p':
				fixed_partition = (int32_t) parse_int(optarg, "--partition",
													  0, INT32_MAX);
				break;
			case 'P':
				partition_prefix = 1;
				break;
			case 'N':
				null_marker = optarg;
				break;
			case 'K':
				key_prefix = 1;
				break;
			case 'H':
				header_prefix = 1;
				break;
			case 'x':
				hex = 1;
				break;
			case 'r':
				{
					char	   *end;

					rate = strtod(optarg, &end);
					if (end == optarg || *end != '\0' || !(rate > 0))
						die("invalid --rate: \"%s\"", optarg);
					break;
				}
			case 'l':
				linger_ms = optarg;
				break;
			case 'n':
				batch_num_messages = optarg;
				break;
			case 'X':
				{
					char	   *eq = strchr(optarg, '=');

					if (eq == NULL)
						die("invalid -X \"%s\": expected PROPERTY=VALUE", optarg);
					*eq = '\0';
					set_conf(conf, optarg, eq + 1);
					break;
				}
			case 'q':
				quiet = 1;
				break;
			case 'h':
				usage(stdout);
				return 0;
			default:
				usage(stderr);
				return 2;
		}
	}
	if (optind < argc || brokers == NULL || topic_name == NULL)
	{
		if (optind < argc)
			fprintf(stderr, "%s: unexpected argument \"%s\"\n", PROGNAME,
					argv[optind]);
		else
			fprintf(stderr, "%s: --brokers and --topic are required\n",
					PROGNAME);
		usage(stderr);
		return 2;
	}
	if (partition_prefix && fixed_partition != RD_KAFKA_PARTITION_UA)
		die("--partition and --partition-prefix cannot be used together");

	set_conf(conf, "bootstrap.servers", brokers);
	set_conf(conf, "linger.ms", linger_ms);
	set_conf(conf, "batch.num.messages", batch_num_messages);
	set_conf(conf, "queue.buffering.max.messages", "1000000");
	set_conf(conf, "acks", "all");

	/*
	 * A request whose answer is lost when a broker goes down (the crash tests
	 * take them down while producing) is sent again: without idempotence the
	 * partition may then hold the messages twice, which the tests would count
	 * as streamwin's duplicates.
	 */
	set_conf(conf, "enable.idempotence", "true");
	rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);

	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
		die("could not create producer: %s", errstr);
	rkt = rd_kafka_topic_new(rk, topic_name, NULL);
	if (rkt == NULL)
		die("could not create topic handle: %s",
			rd_kafka_err2str(rd_kafka_last_error()));

	clock_gettime(CLOCK_MONOTONIC, &start);

	while ((linelen = getline(&line, &linecap, stdin)) != -1)
	{
		char	   *payload = line;
		size_t		len = (size_t) linelen;
		char	   *key = NULL;
		size_t		keylen = 0;
		rd_kafka_headers_t *headers = NULL;
		int32_t		partition = fixed_partition;

		lineno++;
		if (len > 0 && payload[len - 1] == '\n')
			payload[--len] = '\0';

		if (partition_prefix)
		{
			char	   *field = split_tab(&payload, &len);

			if (field == NULL)
				die("line %" PRId64 ": expected PARTITION<TAB>payload",
					lineno);
			partition = (int32_t) parse_int(field, "partition prefix",
											0, INT32_MAX);
		}
		if (key_prefix)
		{
			key = split_tab(&payload, &len);
			if (key == NULL)
				die("line %" PRId64 ": expected KEY<TAB>payload", lineno);
			keylen = strlen(key);
		}
		if (header_prefix)
		{
			char	   *field = split_tab(&payload, &len);

			if (field == NULL)
				die("line %" PRId64 ": expected HEADERS<TAB>payload", lineno);
			headers = parse_headers(field);
		}
		if (null_marker != NULL && key != NULL && strcmp(key, null_marker) == 0)
		{
			key = NULL;
			keylen = 0;
		}
		if (null_marker != NULL && len == strlen(null_marker) &&
			memcmp(payload, null_marker, len) == 0)
		{
			payload = NULL;
			len = 0;
		}
		if (hex && payload != NULL)
			len = unhex(payload, len, lineno);
		if (hex && key != NULL)
			keylen = unhex(key, keylen, lineno);

		/*
		 * Pace on absolute deadlines (message i is due at start + i/rate), so
		 * the time spent producing does not make the rate drift.
		 */
		if (rate > 0)
		{
			struct timespec due = start;

			timespec_add_ns(&due, (int64_t) (produced * (1e9 / rate)));
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due,
								   NULL) == EINTR)
				;
		}

		for (;;)
		{
			rd_kafka_resp_err_t err;

			if (headers == NULL)
				err = rd_kafka_produce(rkt, partition, RD_KAFKA_MSG_F_COPY,
									   payload, len, key, keylen, NULL) == 0 ?
					RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_last_error();
			else
			{
				/* on success the message owns the headers; on failure we do */
				err = rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt),
										RD_KAFKA_V_PARTITION(partition),
										RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
										RD_KAFKA_V_VALUE(payload, len),
										RD_KAFKA_V_KEY(key, keylen),
										RD_KAFKA_V_HEADERS(headers),
										RD_KAFKA_V_END);
				if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
					headers = NULL;
			}
			if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
				break;
			if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
				die("line %" PRId64 ": could not produce: %s", lineno,
					rd_kafka_err2str(err));
			/* The local queue is full: serve delivery reports, then retry. */
			rd_kafka_poll(rk, 100);
		}
		produced++;

		/* Serve delivery reports now and then, without waiting. */
		if (produced % 1024 == 0)
			rd_kafka_poll(rk, 0);
	}
	if (ferror(stdin))
		die("could not read stdin: %s", strerror(errno));
	free(line);

	/*
	 * Wait for every outstanding message.  Each one ends in a delivery report
	 * at the latest after message.timeout.ms, so this terminates; keep
	 * flushing rather than give up after an arbitrary time, since a broker
	 * outage in a fault test can last a while.
	 */
	flush_rounds = 0;
	while (rd_kafka_outq_len(rk) > 0)
	{
		rd_kafka_flush(rk, 10000);
		if (++flush_rounds % 6 == 0)
			fprintf(stderr, "%s: still waiting for %d message(s) to be delivered\n",
					PROGNAME, rd_kafka_outq_len(rk));
	}
	/* Serve any delivery reports that flush left queued. */
	rd_kafka_poll(rk, 0);

	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);

	if (failed > 0 || delivered != produced)
	{
		fprintf(stderr, "%s: %" PRId64 " of %" PRId64 " message(s) not delivered; first error: %s\n",
				PROGNAME, produced - delivered, produced,
				failed > 0 ? first_failure : "(no delivery report)");
		return 1;
	}
	if (!quiet)
		fprintf(stderr, "produced %" PRId64 " messages\n", produced);
	return 0;
}
