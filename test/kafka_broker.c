/*-------------------------------------------------------------------------
 *
 * kafka_broker.c
 *	  A Kafka broker for streamwin's tests, built on librdkafka's mock cluster.
 *
 * No Apache Kafka server can be installed on the machines the tests run on,
 * so the tests talk to librdkafka's mock cluster instead (rdkafka_mock.h).
 * The mock brokers speak the real Kafka protocol over loopback TCP, so the
 * extension, kafka_produce and anything else that uses librdkafka connect to
 * them exactly as they would connect to a real cluster.  This program only
 * keeps a mock cluster alive, creates the topics the test asks for, tells the
 * test where the brokers listen, and turns signals into broker faults.
 *
 * Usage:
 *	  kafka_broker [--brokers N] [--topic NAME:PARTITIONS]...
 *				   [--spread] [--rtt BROKER:MS]... [--bootstrap-file PATH]
 *
 * The mock makes broker 1 the leader of every partition; --spread makes
 * broker p mod N + 1 the leader of partition p of each topic, as a real
 * cluster spreads them.  --rtt delays every response of one broker (1..N)
 * by MS milliseconds: a consumer then hears from its partitions' leaders at
 * different times, as from a cluster with one slow broker.
 *
 * Once every topic exists, it prints one line "BOOTSTRAP host:port[,...]" on
 * stdout and, with --bootstrap-file, writes the same list to PATH (through
 * a temporary file and rename(), so a script polling for the file never
 * reads it half-written).
 *
 * Signals:
 *	  SIGTERM, SIGINT  destroy the cluster and exit 0
 *	  SIGUSR1          take every broker down (connections are closed and
 *					   new ones refused), to test broker outages
 *	  SIGUSR2          bring every broker up again
 *
 * Things about the mock (librdkafka 2.0.2) that tests need to know:
 *
 * - Each partition keeps at most about 5 MB of message sets (and at most
 *	 100000 message sets); past that the oldest sets are dropped and the
 *	 partition's start offset moves forward, exactly like retention on a
 *	 real broker.  A consumer that has not yet read them then gets "offset
 *	 out of range".  Tests with a lot of data must spread it over enough
 *	 partitions.
 *
 * - Auto-creation: ANY metadata request that names an unknown topic makes
 *	 the mock create it on the spot, with 4 partitions and no error.  That
 *	 includes consumers with allow.auto.create.topics=false: the mock speaks
 *	 a Metadata version older than 4, which has no way to say "don't create"
 *	 (librdkafka logs "allow.auto.create.topics=false not supported by
 *	 broker").  So "topic does not exist" cannot be tested against the mock;
 *	 a partition beyond the topic's count still gives "unknown partition".
 *	 Tests must not depend on auto-creation: they create their topics with
 *	 --topic, so that the partition count is the one they expect.
 *
 * - Nothing is persisted: when this program exits, the data is gone.
 *
 * - The mock leaves Nagle's algorithm on for its connections, where a real
 *	 Kafka broker turns it off (TCP_NODELAY on every connection it accepts).
 *	 A response the mock writes in pieces then waits for the client's
 *	 delayed acknowledgement: about 40 ms on Linux, so that a new consumer's
 *	 first requests each took 40 ms instead of well under one.  This program
 *	 sets TCP_NODELAY on the mock's listening sockets, which the sockets
 *	 they accept inherit on Linux, so that the tests see a broker's
 *	 latency, not an artifact of the stand-in.
 *
 * Signals are blocked before librdkafka starts its threads (which inherit
 * the mask) and are taken synchronously with sigwait() in the main thread,
 * so no work at all happens in a signal handler.
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MAX_TOPICS 64
#define MAX_RTTS 16

typedef struct TopicSpec
{
	char	   *name;
	int			partitions;
} TopicSpec;

#define PROGNAME "kafka_broker"
#include "test_util.h"

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: %s [--brokers N] [--topic NAME:PARTITIONS]... [--spread]\n"
			"       [--rtt BROKER:MS]... [--bootstrap-file PATH]\n"
			"\n"
			"Runs a Kafka mock cluster (librdkafka's rdkafka_mock) on loopback TCP\n"
			"ports until SIGTERM or SIGINT.\n"
			"\n"
			"Options:\n"
			"  --brokers N               number of brokers (default 1)\n"
			"  --topic NAME:PARTITIONS   create a topic (replication factor 1); repeatable\n"
			"  --spread                  lead partition p by broker p mod N + 1 (default: 1)\n"
			"  --rtt BROKER:MS           delay broker BROKER's responses by MS ms; repeatable\n"
			"  --bootstrap-file PATH     write the bootstrap server list to PATH (atomically)\n"
			"                            once the topics exist\n"
			"  --help                    show this help\n"
			"\n"
			"Prints \"BOOTSTRAP host:port[,host:port...]\" on stdout when ready.\n"
			"SIGUSR1 takes every broker down, SIGUSR2 brings them back up.\n"
			"\n"
			"Note: the mock keeps only about 5 MB (and at most 100000 message sets)\n"
			"per partition; older data is dropped as if by retention, so use enough\n"
			"partitions for big runs.  Create topics with --topic: any client that\n"
			"asks for an unknown topic makes the mock create it with 4 partitions.\n",
			PROGNAME);
}


/*
 * librdkafka log lines of the dummy handle; keep them on stderr, prefixed,
 * so a test log shows where they came from.
 */
static void
log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	fprintf(stderr, "%s: librdkafka %d %s: %s\n", PROGNAME, level, fac, buf);
}

/*
 * Write "contents" to "path" through a temporary file in the same directory
 * and rename(), which is atomic: readers see no file or the whole file.
 */
static void
write_file_atomically(const char *path, const char *contents)
{
	size_t		tmplen = strlen(path) + 32;
	char	   *tmp = malloc(tmplen);
	FILE	   *f;

	if (tmp == NULL)
		die("out of memory");
	snprintf(tmp, tmplen, "%s.tmp.%d", path, (int) getpid());

	f = fopen(tmp, "w");
	if (f == NULL)
		die("could not create \"%s\": %s", tmp, strerror(errno));
	if (fprintf(f, "%s\n", contents) < 0 || fflush(f) != 0 ||
		fsync(fileno(f)) != 0)
		die("could not write \"%s\": %s", tmp, strerror(errno));
	if (fclose(f) != 0)
		die("could not close \"%s\": %s", tmp, strerror(errno));
	if (rename(tmp, path) != 0)
		die("could not rename \"%s\" to \"%s\": %s", tmp, path,
			strerror(errno));
	free(tmp);
}

/* Parse a strictly positive decimal int, or die naming the option. */
static int
parse_positive(const char *s, const char *what)
{
	return (int) parse_int(s, what, 1, 100000);
}

/*
 * TCP_NODELAY on every listening TCP socket of this process: the mock
 * brokers' (see the header).  The mock gives no access to its sockets, so
 * they are found among the process's open descriptors; the connections a
 * listener accepts inherit the option.  Returns how many were set.
 */
static int
disable_nagle_on_listeners(void)
{
	DIR		   *dir = opendir("/proc/self/fd");
	struct dirent *de;
	int			n = 0;

	if (dir == NULL)
		return 0;
	while ((de = readdir(dir)) != NULL)
	{
		int			fd = atoi(de->d_name);
		int			listening = 0,
					domain = 0,
					one = 1;
		socklen_t	len = sizeof(int);

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == dirfd(dir))
			continue;
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
			continue;
		len = sizeof(int);
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
			(domain != AF_INET && domain != AF_INET6))
			continue;
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0)
			n++;
	}
	closedir(dir);
	return n;
}

/* Apply "up" or "down" to brokers 1..nbrokers (the mock numbers them so). */
static void
set_brokers(rd_kafka_mock_cluster_t *mcluster, int nbrokers, int up)
{
	int			id;

	for (id = 1; id <= nbrokers; id++)
	{
		rd_kafka_resp_err_t err;

		err = up ? rd_kafka_mock_broker_set_up(mcluster, id)
			: rd_kafka_mock_broker_set_down(mcluster, id);
		if (err)
			fprintf(stderr, "%s: could not set broker %d %s: %s\n",
					PROGNAME, id, up ? "up" : "down", rd_kafka_err2str(err));
	}
	fprintf(stderr, "%s: all %d broker(s) %s\n", PROGNAME, nbrokers,
			up ? "up" : "down");
}

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"brokers", required_argument, NULL, 'b'},
		{"topic", required_argument, NULL, 't'},
		{"bootstrap-file", required_argument, NULL, 'f'},
		{"rtt", required_argument, NULL, 'r'},
		{"spread", no_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			nbrokers = 1;
	TopicSpec	topics[MAX_TOPICS];
	int			ntopics = 0;
	const char *bootstrap_file = NULL;
	int			rtt_broker[MAX_RTTS];
	int			rtt_ms[MAX_RTTS];
	int			nrtts = 0;
	int			spread = 0;
	int			opt;
	sigset_t	sigs;
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mcluster;
	const char *bootstraps;
	int			i;

	while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) != -1)
	{
		switch (opt)
		{
			case 'b':
				nbrokers = parse_positive(optarg, "--brokers");
				break;
			case 't':
				{
					char	   *colon = strrchr(optarg, ':');

					if (colon == NULL || colon == optarg)
						die("invalid --topic \"%s\": expected NAME:PARTITIONS",
							optarg);
					if (ntopics >= MAX_TOPICS)
						die("too many topics (at most %d)", MAX_TOPICS);
					topics[ntopics].partitions =
						parse_positive(colon + 1, "partition count");
					topics[ntopics].name = strndup(optarg, colon - optarg);
					ntopics++;
					break;
				}
			case 'f':
				bootstrap_file = optarg;
				break;
			case 's':
				spread = 1;
				break;
			case 'r':
				{
					char	   *colon = strchr(optarg, ':');

					if (colon == NULL || colon == optarg)
						die("invalid --rtt \"%s\": expected BROKER:MS", optarg);
					if (nrtts >= MAX_RTTS)
						die("too many --rtt options (at most %d)", MAX_RTTS);
					*colon = '\0';
					rtt_broker[nrtts] = parse_positive(optarg, "--rtt broker");
					rtt_ms[nrtts] = parse_positive(colon + 1, "--rtt milliseconds");
					nrtts++;
					break;
				}
			case 'h':
				usage(stdout);
				return 0;
			default:
				usage(stderr);
				return 2;
		}
	}
	if (optind < argc)
	{
		fprintf(stderr, "%s: unexpected argument \"%s\"\n", PROGNAME,
				argv[optind]);
		usage(stderr);
		return 2;
	}

	/*
	 * Block the signals we handle before librdkafka creates any thread: the
	 * threads inherit this mask, so the signals can only be taken by the
	 * sigwait() below.
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0)
		die("could not block signals");

	/*
	 * The mock cluster needs a client handle for its bookkeeping; a producer
	 * with no bootstrap servers does nothing else.  Its only chatter is a
	 * warning about the missing bootstrap.servers, which we silence by
	 * keeping its log level at errors.
	 */
	conf = rd_kafka_conf_new();
	rd_kafka_conf_set_log_cb(conf, log_cb);
	set_conf(conf, "log_level", "3");
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
		die("could not create client handle: %s", errstr);

	mcluster = rd_kafka_mock_cluster_new(rk, nbrokers);
	if (mcluster == NULL)
		die("could not create mock cluster with %d broker(s)", nbrokers);

	for (i = 0; i < ntopics; i++)
	{
		rd_kafka_resp_err_t err;

		err = rd_kafka_mock_topic_create(mcluster, topics[i].name,
										 topics[i].partitions, 1);
		if (err)
			die("could not create topic \"%s\": %s", topics[i].name,
				rd_kafka_err2str(err));
		for (int p = 0; spread && p < topics[i].partitions; p++)
			if (rd_kafka_mock_partition_set_leader(mcluster, topics[i].name, p, p % nbrokers + 1))
				die("could not set the leader of %s [%d]", topics[i].name, p);
	}

	for (i = 0; i < nrtts; i++)
	{
		if (rtt_broker[i] > nbrokers)
			die("--rtt names broker %d of %d", rtt_broker[i], nbrokers);
		if (rd_kafka_mock_broker_set_rtt(mcluster, rtt_broker[i], rtt_ms[i]))
			die("could not set the round-trip time of broker %d", rtt_broker[i]);
	}

	if (disable_nagle_on_listeners() < nbrokers)
		fprintf(stderr, "%s: could not set TCP_NODELAY on every broker's listening socket\n",
				PROGNAME);
	bootstraps = rd_kafka_mock_cluster_bootstraps(mcluster);
	printf("BOOTSTRAP %s\n", bootstraps);
	fflush(stdout);
	if (bootstrap_file)
		write_file_atomically(bootstrap_file, bootstraps);
	fprintf(stderr, "%s: %d broker(s) at %s, %d topic(s)\n", PROGNAME,
			nbrokers, bootstraps, ntopics);

	for (;;)
	{
		int			sig;

		if (sigwait(&sigs, &sig) != 0)
			die("sigwait failed");
		if (sig == SIGTERM || sig == SIGINT)
			break;
		else if (sig == SIGUSR1)
			set_brokers(mcluster, nbrokers, 0);
		else if (sig == SIGUSR2)
		{
			set_brokers(mcluster, nbrokers, 1);
			/* in case bringing a broker up made it a new listener */
			(void) disable_nagle_on_listeners();
		}
	}

	fprintf(stderr, "%s: shutting down\n", PROGNAME);
	rd_kafka_mock_cluster_destroy(mcluster);
	rd_kafka_destroy(rk);
	for (i = 0; i < ntopics; i++)
		free(topics[i].name);
	return 0;
}
