/*-------------------------------------------------------------------------
 *
 * raw_consume.c
 *	  The raw ceiling of streamwin's benchmark (test/bench/run_bench.sh): a
 *	  bare librdkafka consumer that reads every message of a topic and
 *	  discards it.
 *
 * It is configured like streamwin's consumer (src/sources/kafka_consumer.c): manual
 * assignment of every partition from the beginning, no group commits,
 * fetch.wait.max.ms = 100, queued.min.messages ten batches' worth,
 * partition EOF events on, and it takes messages
 * in batches with rd_kafka_consume_batch_queue() from the consumer queue,
 * as kafka_fetch() does (with a 10 ms timeout, so it never waits long for a
 * batch to fill).  The only work per message is adding its length to
 * a byte count (so the payload is touched once, as a decoder would).
 *
 * Usage:
 *	  raw_consume --brokers B --topic T --partitions N [--expect MESSAGES]
 *				  [--batch N] [--dump FILE] [-X prop=value]...
 *
 * --dump FILE also writes "PARTITION<TAB>OFFSET<TAB>RECEIVED<TAB>PAYLOAD" per
 * message to FILE, RECEIVED being the wall-clock time (microseconds since the
 * Unix epoch) at which this consumer got it.  The latency measurement uses it
 * to learn where each event landed and how long Kafka alone took to deliver
 * it; do not use it when measuring the ceiling.
 *
 * Stops when every partition has reported EOF or, with --expect, once that
 * many messages were read (waiting for them if need be, up to 600 s).
 * Prints one line:
 *
 *	  messages=N bytes=B wall_s=W first_s=F cpu_s=C user_s=U sys_s=S maxrss_kb=K
 *
 * where W is the wall time from the assignment to the last message (F: to
 * the first one), and the
 * CPU times come from getrusage(RUSAGE_SELF), which counts every thread of
 * the process (librdkafka's broker and main threads included), over the
 * same interval.
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
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define MAX_PROPS 64

#define PROGNAME "raw_consume"
#include "../test_util.h"



static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
tv_s(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"brokers", required_argument, NULL, 'b'},
		{"topic", required_argument, NULL, 't'},
		{"partitions", required_argument, NULL, 'p'},
		{"expect", required_argument, NULL, 'e'},
		{"batch", required_argument, NULL, 'n'},
		{"dump", required_argument, NULL, 'd'},
		{NULL, 0, NULL, 0}
	};
	const char *brokers = NULL;
	const char *topic = NULL;
	int			npart = 0;
	int64_t		expect = -1;
	int			batch = 100000;
	FILE	   *dump = NULL;
	char	   *props[MAX_PROPS];
	int			nprops = 0;
	int			opt;
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_topic_partition_list_t *list;
	rd_kafka_queue_t *queue;
	rd_kafka_message_t **msgs;
	char	   *eof;
	int			neof = 0;
	int64_t		nmsgs = 0;
	int64_t		nbytes = 0;
	double		t0;
	double		t_last;
	double		t_first = 0;
	struct rusage ru0;
	struct rusage ru1;

	conf = rd_kafka_conf_new();
	while ((opt = getopt_long(argc, argv, "X:", long_options, NULL)) != -1)
	{
		switch (opt)
		{
			case 'b':
				brokers = optarg;
				break;
			case 't':
				topic = optarg;
				break;
			case 'p':
				npart = (int) parse_int(optarg, "--partitions", 1, 100000);
				break;
			case 'e':
				expect = parse_int(optarg, "--expect", 0, INT64_MAX);
				break;
			case 'n':
				batch = (int) parse_int(optarg, "--batch", 1, 10000000);
				break;
			case 'd':
				dump = fopen(optarg, "w");
				if (dump == NULL)
					die("could not open \"%s\": %s", optarg, strerror(errno));
				break;
			case 'X':
				if (strchr(optarg, '=') == NULL)
					die("invalid -X \"%s\"", optarg);
				if (nprops == MAX_PROPS)
					die("too many -X options");
				props[nprops++] = optarg;
				break;
			default:
				fprintf(stderr, "usage: %s --brokers B --topic T --partitions N [--expect M] [--batch N] [--dump FILE] [-X k=v]\n",
						PROGNAME);
				return 2;
		}
	}
	if (brokers == NULL || topic == NULL || npart <= 0 || batch <= 0)
		die("--brokers, --topic and --partitions are required");

	/* Same settings as streamwin's consumer (src/sources/kafka_consumer.c). */
	set_conf(conf, "bootstrap.servers", brokers);
	set_conf(conf, "group.id", "streamwin-bench-raw");
	set_conf(conf, "enable.auto.commit", "false");
	set_conf(conf, "enable.auto.offset.store", "false");
	set_conf(conf, "enable.partition.eof", "true");
	set_conf(conf, "auto.offset.reset", "error");
	set_conf(conf, "fetch.wait.max.ms", "100");
	set_conf(conf, "socket.nagle.disable", "true");
	{
		char		prefetch[32];

		/* as streamwin: ten batches' worth, at least librdkafka's default */
		snprintf(prefetch, sizeof(prefetch), "%d",
				 batch > 10000000 / 10 ? 10000000 : (batch * 10 < 100000 ? 100000 : batch * 10));
		set_conf(conf, "queued.min.messages", prefetch);
	}
	/* then -X, which may override them */
	for (int i = 0; i < nprops; i++)
	{
		char	   *eq = strchr(props[i], '=');

		*eq = '\0';
		set_conf(conf, props[i], eq + 1);
	}

	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
		die("could not create consumer: %s", errstr);

	eof = calloc(npart, 1);
	msgs = malloc(sizeof(*msgs) * batch);
	if (eof == NULL || msgs == NULL)
		die("out of memory");

	getrusage(RUSAGE_SELF, &ru0);
	t0 = t_last = now_s();

	list = rd_kafka_topic_partition_list_new(npart);
	for (int p = 0; p < npart; p++)
		rd_kafka_topic_partition_list_add(list, topic, p)->offset =
			RD_KAFKA_OFFSET_BEGINNING;
	if (rd_kafka_assign(rk, list) != RD_KAFKA_RESP_ERR_NO_ERROR)
		die("could not assign partitions");
	rd_kafka_topic_partition_list_destroy(list);
	queue = rd_kafka_queue_get_consumer(rk);

	while (expect >= 0 ? nmsgs < expect : neof < npart)
	{
		ssize_t		got;

		/*
		 * A batch call waits until its batch is full or its timeout expires,
		 * which would delay the receive times of --dump: take messages one by
		 * one there (each call returns as soon as one is queued).
		 */
		if (dump)
		{
			msgs[0] = rd_kafka_consume_queue(queue, 100);
			got = msgs[0] != NULL ? 1 : 0;
		}
		else
		{
			/*
			 * Short timeout: the call returns only when the batch is full or
			 * the timeout expires, so a long one would add its whole length
			 * after the last message (streamwin takes what is queued without
			 * waiting and sleeps on librdkafka's wakeup descriptor instead).
			 */
			got = rd_kafka_consume_batch_queue(queue, 10, msgs, batch);
		}

		if (got < 0)
			die("consume failed: %s", rd_kafka_err2str(rd_kafka_last_error()));
		if (now_s() - t0 > 600)
			die("gave up after 600 s with %" PRId64 " messages", nmsgs);
		for (ssize_t i = 0; i < got; i++)
		{
			rd_kafka_message_t *m = msgs[i];

			if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
			{
				if (m->partition >= 0 && m->partition < npart && !eof[m->partition])
				{
					eof[m->partition] = 1;
					neof++;
				}
			}
			else if (m->err)
				fprintf(stderr, "%s: %s\n", PROGNAME, rd_kafka_message_errstr(m));
			else
			{
				if (nmsgs++ == 0)
					t_first = now_s();
				nbytes += m->len;
				if (dump)
				{
					struct timespec rt;

					clock_gettime(CLOCK_REALTIME, &rt);
					fprintf(dump, "%d\t%" PRId64 "\t%" PRId64 "\t%.*s\n", (int) m->partition,
							(int64_t) m->offset,
							(int64_t) rt.tv_sec * 1000000 + rt.tv_nsec / 1000,
							(int) m->len, (const char *) m->payload);
				}
				t_last = now_s();
				if (m->partition >= 0 && m->partition < npart && eof[m->partition])
				{
					eof[m->partition] = 0;
					neof--;
				}
			}
			rd_kafka_message_destroy(m);
		}
	}
	getrusage(RUSAGE_SELF, &ru1);

	printf("messages=%" PRId64 " bytes=%" PRId64 " wall_s=%.3f first_s=%.3f cpu_s=%.3f user_s=%.3f sys_s=%.3f maxrss_kb=%ld\n",
		   nmsgs, nbytes, t_last - t0, t_first > 0 ? t_first - t0 : 0,
		   tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime),
		   tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime),
		   tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime), ru1.ru_maxrss);
	fflush(stdout);

	if (dump && fclose(dump) != 0)
		die("could not write the dump file: %s", strerror(errno));
	rd_kafka_queue_destroy(queue);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	free(msgs);
	free(eof);
	return 0;
}
