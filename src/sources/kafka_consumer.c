/*-------------------------------------------------------------------------
 *
 * kafka_consumer.c
 *	  Reading micro-batches from a Kafka topic inside a PostgreSQL backend.
 *
 * See kafka_consumer.h for the contract.  This file wraps a librdkafka
 * high-level consumer used only through assign(): librdkafka 2.0 requires a
 * group.id for assign() (without one, assign and every poll fail with
 * "Local: Unknown group"), but the group is never joined and no offset is
 * ever committed to it; offsets live in PostgreSQL.
 *
 * Which thread runs what.  librdkafka does its network I/O on its own
 * threads; those must never call into PostgreSQL (palloc, elog and friends
 * are not thread-safe).  So:
 *
 * - log.queue=true and rd_kafka_set_log_queue(rk, NULL) make librdkafka
 *	 queue log lines on the main queue instead of calling log_cb from its
 *	 threads; error events are always queued on the main queue.  We serve
 *	 the main queue with rd_kafka_poll(rk, 0) from our own calls only, so
 *	 log_cb and error_cb run on the backend's thread, where elog(LOG) is
 *	 fine.  We deliberately do not forward the main queue into the consumer
 *	 queue (rd_kafka_poll_set_consumer): keeping them apart lets the
 *	 metadata and watermark calls collect error texts without consuming
 *	 messages.  Both callbacks still check the thread and fall back to
 *	 stderr, in case some librdkafka path ever calls them directly.
 *
 * - Messages, end-of-partition events and per-partition errors arrive on
 *	 the consumer queue, which only kafka_fetch() consumes.
 *
 * - Both queues write to a non-blocking pipe when they become non-empty
 *	 (rd_kafka_queue_io_event_enable); kafka_fetch() and callers between
 *	 batches wait on it with WaitLatchOrSocket, so waits also serve
 *	 interrupts.
 *
 * Callbacks never raise errors (a longjmp through librdkafka's stack would
 * leave its locks held); they record what happened in the consumer and the
 * next kafka_fetch() raises it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "catalog/pg_authid_d.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/json.h"
#include "utils/wait_event.h"

#include "kafka_consumer.h"
#include "kafka_sasl.h"

/*
 * How long kafka_fetch() may spend checking that some broker answers, when
 * nothing arrived and librdkafka reported connection trouble.
 */
#define KAFKA_PROBE_TIMEOUT_MS	2000

/*
 * A partition that has sent neither a message nor an end-of-partition event
 * this long after kafka_assign() is checked against the topic's metadata,
 * since librdkafka only notices a nonexistent partition when its metadata
 * changes.
 */
#define KAFKA_VERIFY_AFTER_MS	5000


/* Default group.id and client.id; the group is never joined. */
#define KAFKA_DEFAULT_GROUP_ID	"streamwin"
#define KAFKA_DEFAULT_CLIENT_ID "streamwin"

typedef struct KafkaPartitionState
{
	bool		assigned;
	bool		eof;			/* end reported, no message delivered since */
	bool		heard;			/* message or end seen since assigned */
	int64		next_offset;	/* next offset to deliver, -1 if unknown */
	int64		known_end;		/* the high watermark the broker last answered
								 * (kafka_query_watermarks), -1 */

	/*
	 * kafka_limit_next_fetch: what this fetch may still take of the partition
	 * (-1: no limit), and the messages taken from the queue beyond it, in
	 * offset order, for the next fetches (a ring).
	 */
	int			limit;
	rd_kafka_message_t **held;
	int			nheld;
	int			held_first;
	int			held_cap;
} KafkaPartitionState;

struct KafkaConsumer
{
	rd_kafka_t *rk;
	rd_kafka_queue_t *queue;	/* consumer queue: messages and their events */
	rd_kafka_queue_t *mainq;	/* main queue: error and log events */
	rd_kafka_topic_t *rkt;		/* for metadata and watermark requests */
	char	   *topic;
	pthread_t	owner;			/* the backend thread, the only one that may
								 * call into PostgreSQL */
	int			wakeup_rfd;
	int			wakeup_wfd;

	/* Assignment, and per-partition state indexed by partition number. */
	KafkaPartitionState *parts;
	int			nparts;
	int			nassigned;
	int			neof;			/* assigned partitions with eof set */
	int64		assigned_at;	/* monotonic_ms() of the last kafka_assign */
	bool		assignment_verified;	/* partitions checked against metadata
										 * since then */

	/* The current batch: owned messages and the caller's view of them. */
	rd_kafka_message_t **rkmsgs;
	KafkaMessage *msgs;
	int			nmsgs;
	int			capacity;

	/* Recorded by the callbacks, acted upon by kafka_fetch(). */
	bool		have_last_error;	/* reported since the last fetch began */
	char		last_error[1024];	/* most recent error text, or "" */
	bool		conn_suspect;	/* connection trouble since data last came */
	rd_kafka_resp_err_t pending_err;	/* error to raise at the next fetch */
	char		pending_errstr[1024];

	uint64		stale_dropped;	/* messages dropped as already delivered */
	int64		held_bytes;		/* held back, over all partitions (held_size) */

	KafkaConsumer *next;		/* in the list of open consumers */
};

/* Open consumers, destroyed at process exit if the caller did not. */
static KafkaConsumer *open_consumers = NULL;
static bool exit_callback_registered = false;

static void consumer_destroy(KafkaConsumer *c);
static void release_batch(KafkaConsumer *c);

/* ---------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------
 */

static int64
monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * librdkafka's metadata and watermark requests block their caller up to
 * their timeout and serve no interrupts: a broker that does not answer
 * would hold a stop, a cancel or a shutdown for the whole timeout (ten
 * seconds when a consumer opens).  They are made in slices that grow from
 * two seconds, doubling, up to the timeout, with interrupts served between:
 * a request that timed out is made again, and one that a broker answers
 * slowly gets the longer slices (a timeout of two seconds or less is one).
 */
#define KAFKA_FIRST_SLICE_MS	2000

typedef struct RequestSlices
{
	int64		deadline;
	int			next;			/* the next slice's length */
	bool		begun;			/* a slice was given */
} RequestSlices;

static void
slices_begin(RequestSlices *sl, int timeout_ms)
{
	sl->deadline = monotonic_ms() + Max(timeout_ms, 1);
	sl->next = KAFKA_FIRST_SLICE_MS;
	sl->begun = false;
}

/*
 * The next slice's timeout, or 0 once the deadline has passed; interrupts
 * are served before every slice but the first.
 */
static int
slices_next(RequestSlices *sl)
{
	int64		left = sl->deadline - monotonic_ms();
	int			slice;

	if (sl->begun)
	{
		if (left <= 0)
			return 0;
		CHECK_FOR_INTERRUPTS();
	}
	sl->begun = true;
	slice = (int) Min((int64) sl->next, Max(left, 1));
	sl->next = sl->next < INT_MAX / 2 ? sl->next * 2 : INT_MAX;
	return slice;
}

/*
 * Did a request end with its slice, to be made again?  It timed out, or
 * found no broker up within it (__TRANSPORT: librdkafka waits the timeout
 * for one, which a broker still connecting, or one that never answers,
 * does not become).
 */
static bool
request_waits(rd_kafka_resp_err_t err)
{
	return err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT;
}

static inline bool
on_owner_thread(KafkaConsumer *c)
{
	return pthread_equal(pthread_self(), c->owner);
}

static void
set_last_error(KafkaConsumer *c, const char *errtext)
{
	strlcpy(c->last_error, errtext, sizeof(c->last_error));
	c->have_last_error = true;
}

/* Record an error for kafka_fetch() to raise; the first one wins. */
static void
set_pending_error(KafkaConsumer *c, rd_kafka_resp_err_t err, const char *errtext)
{
	if (c->pending_err != RD_KAFKA_RESP_ERR_NO_ERROR)
		return;
	c->pending_err = err;
	strlcpy(c->pending_errstr, errtext, sizeof(c->pending_errstr));
}

/*
 * A fetch cut across partitions holds back at most this many bytes of
 * other partitions' messages while it waits for its shares, so that
 * partitions whose messages come first cannot fill memory.  A message
 * counts its payload, its key and what librdkafka keeps for it besides
 * (its message and op structures, about 400 bytes): a topic of tombstones
 * or tiny messages would otherwise hold millions.  256 MB so counted is
 * about what 64 MB of payloads was for messages of a hundred bytes (some
 * 500,000): a smaller bound cut a backlog's batches short, one batch more
 * over bench case 6 and half again its CPU.
 */
#define KAFKA_MAX_HELD_BYTES	((int64) 256 * 1024 * 1024)
#define KAFKA_HELD_MESSAGE_OVERHEAD 400

static inline int64
held_size(const rd_kafka_message_t *m)
{
	return (int64) m->len + (int64) m->key_len + KAFKA_HELD_MESSAGE_OVERHEAD;
}

/*
 * Keep a message of a partition beyond this fetch's limit, in order.  False
 * if there is no memory for it (m is destroyed): the caller destroys the
 * messages it has not handled yet, since librdkafka's destroy of the
 * consumer waits for every message it handed out, then raises the error.
 */
static bool
hold_message(KafkaConsumer *c, KafkaPartitionState *ps, rd_kafka_message_t *m)
{
	if (ps->nheld == ps->held_cap)
	{
		int			cap = Max(ps->held_cap * 2, 64);
		rd_kafka_message_t **ring = malloc(cap * sizeof(rd_kafka_message_t *));

		if (ring == NULL)
		{
			rd_kafka_message_destroy(m);
			return false;
		}
		for (int i = 0; i < ps->nheld; i++)
			ring[i] = ps->held[(ps->held_first + i) % ps->held_cap];
		free(ps->held);
		ps->held = ring;
		ps->held_first = 0;
		ps->held_cap = cap;
	}
	ps->held[(ps->held_first + ps->nheld) % ps->held_cap] = m;
	ps->nheld++;
	c->held_bytes += held_size(m);
	return true;
}

static rd_kafka_message_t *
unhold_message(KafkaConsumer *c, KafkaPartitionState *ps)
{
	rd_kafka_message_t *m = ps->held[ps->held_first];

	ps->held_first = (ps->held_first + 1) % ps->held_cap;
	ps->nheld--;
	c->held_bytes -= held_size(m);
	return m;
}

/* Let go of every held message (a new assignment, the end). */
static void
drop_held(KafkaConsumer *c)
{
	for (int p = 0; p < c->nparts; p++)
	{
		KafkaPartitionState *ps = &c->parts[p];

		while (ps->nheld > 0)
			rd_kafka_message_destroy(unhold_message(c, ps));
		ps->limit = -1;
	}
}

static KafkaPartitionState *
partition_state(KafkaConsumer *c, int32 partition)
{
	if (partition < 0 || partition >= c->nparts ||
		!c->parts[partition].assigned)
		return NULL;
	return &c->parts[partition];
}

/* malloc() that raises an error instead of returning NULL. */
static void *
malloc_or_error(size_t size)
{
	void	   *p = malloc(size);

	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return p;
}

/* ---------------------------------------------------------------------
 * librdkafka callbacks.  They run while we serve the main queue, on the
 * backend's thread; they only record and log, never raise errors.
 * ---------------------------------------------------------------------
 */

static void
log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	KafkaConsumer *c = (KafkaConsumer *) rd_kafka_opaque(rk);

	if (c == NULL || !on_owner_thread(c))
	{
		/* Not our thread: stderr ends up in the server log too. */
		fprintf(stderr, "streamwin: librdkafka %s: %s\n", fac, buf);
		return;
	}

	/*
	 * librdkafka uses syslog levels.  Errors also arrive through error_cb
	 * (and end up in the query's status), so they are logged, not raised;
	 * notices and information (version quirks, reconnects) only at DEBUG1.
	 */
	elog(level <= 4 ? LOG : level <= 6 ? DEBUG1 : DEBUG2,
		 "kafka consumer for topic \"%s\": %s: %s", c->topic, fac, buf);
}

static void
error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	KafkaConsumer *c = (KafkaConsumer *) opaque;
	char		fatal[512];

	if (c == NULL || !on_owner_thread(c))
	{
		fprintf(stderr, "streamwin: librdkafka error: %s\n", reason);
		return;
	}

	set_last_error(c, reason);

	switch (err)
	{
		case RD_KAFKA_RESP_ERR__FATAL:
			/* The reason is generic; the fatal error itself says more. */
			if (rd_kafka_fatal_error(rk, fatal, sizeof(fatal)))
				set_last_error(c, fatal);
			set_pending_error(c, err, c->last_error);
			break;

			/*
			 * The assignment cannot be served: the topic or a partition does
			 * not exist, or we may not read it.  librdkafka would wait for
			 * ever, so the fetch must fail.
			 */
		case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
		case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
		case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
		case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
			set_pending_error(c, err, reason);
			break;

			/*
			 * Connection trouble, which librdkafka retries by itself.  It is
			 * only fatal for a fetch if nothing can be had at all; see
			 * kafka_fetch().  End-of-partition states are kept: librdkafka
			 * does not report the end again after reconnecting, so clearing
			 * them would make idle partitions look busy for ever.
			 */
		case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
		case RD_KAFKA_RESP_ERR__TRANSPORT:
		case RD_KAFKA_RESP_ERR__RESOLVE:
		case RD_KAFKA_RESP_ERR__AUTHENTICATION:
		case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
		case RD_KAFKA_RESP_ERR__SSL:
		case RD_KAFKA_RESP_ERR__TIMED_OUT:
			c->conn_suspect = true;
			break;

		default:
			break;
	}

	/*
	 * librdkafka logs every transport error as a "FAIL" log line as well;
	 * don't say it twice.
	 */
	if (err != RD_KAFKA_RESP_ERR__TRANSPORT)
		elog(LOG, "kafka consumer for topic \"%s\": %s: %s",
			 c->topic, rd_kafka_err2name(err), c->last_error);
}

/*
 * Serve the main queue: runs the log and error callbacks for whatever
 * librdkafka has queued, without waiting.
 */
static void
serve_events(KafkaConsumer *c)
{
	rd_kafka_poll(c->rk, 0);
}

/* ---------------------------------------------------------------------
 * Properties
 * ---------------------------------------------------------------------
 */

/*
 * Properties streamwin sets itself and that users may not override, because
 * exactly-once (or our handling of partition ends) depends on them.
 */
static const char *const reserved_properties[] = {
	"bootstrap.servers",
	"metadata.broker.list",
	"enable.auto.commit",
	"auto.commit.enable",
	"auto.commit.interval.ms",
	"enable.auto.offset.store",
	"offset.store.method",
	"offset.store.path",
	"offset.store.sync.interval.ms",
	"auto.offset.reset",
	"enable.partition.eof",
	"log.queue",
	NULL
};

/*
 * Properties that would load a shared library or run a command inside the
 * database server, with the server's operating system privileges.
 */
static const char *const unsafe_properties[] = {
	"plugin.library.paths",
	"sasl.kerberos.kinit.cmd",
	"ssl.engine.location",
	"ssl.providers",
	NULL
};

/*
 * Properties that would change the server process itself: librdkafka
 * installs a handler of its own for internal.termination.signal, for the
 * whole process, and never gives back PostgreSQL's.
 */
static const char *const process_properties[] = {
	"internal.termination.signal",
	NULL
};

/*
 * Properties that make librdkafka queue, at each interval, a document for a
 * callback streamwin does not install: nothing would read them, in a
 * consumer a session keeps between its batches.
 */
static const char *const unread_properties[] = {
	"statistics.interval.ms",
	NULL
};

static bool
in_list(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* Does the property's value name a file the server would read? */
static bool
property_reads_file(const char *key, const char *value)
{
	size_t		len = strlen(key);
	size_t		suffix = strlen(".location");

	if (strcmp(key, "ssl.ca.location") == 0 && strcmp(value, "probe") == 0)
		return false;			/* "probe": look in the system's usual places */
	if (strcmp(key, "sasl.kerberos.keytab") == 0)
		return true;
	return len > suffix && strcmp(key + len - suffix, ".location") == 0;
}

/* Could the property's value be a secret that must not appear in errors? */
static bool
property_is_secret(const char *key)
{
	return strstr(key, "password") != NULL ||
		strstr(key, "secret") != NULL ||
		strstr(key, "jaas") != NULL ||
		strstr(key, "token") != NULL ||
		strstr(key, ".pem") != NULL ||
		strstr(key, "key") != NULL;
}

/*
 * librdkafka runs its kinit command (sasl.kerberos.kinit.cmd, which users
 * may not set) through the shell, with these properties' values put into
 * it as they are: a value with a quote, a semicolon or $( would run a
 * command of its own, as the server's operating system user.  So they may
 * hold only what a Kerberos principal or a file name needs.
 */
static const char *const kinit_properties[] = {
	"sasl.kerberos.principal",
	"sasl.kerberos.keytab",
	NULL
};

static bool
shell_safe(const char *value)
{
	/* nor an option of kinit's */
	if (value[0] == '-')
		return false;
	for (const char *c = value; *c; c++)
		if (!isalnum((unsigned char) *c) && strchr("._-/@+=:,", *c) == NULL)
			return false;
	return true;
}

/* Refuse the properties users may not set at all, or not to that value. */
static void
check_property_allowed(const char *key, const char *value)
{
	if (in_list(reserved_properties, key))
	{
		const char *hint;

		if (strcmp(key, "bootstrap.servers") == 0 ||
			strcmp(key, "metadata.broker.list") == 0)
			hint = "Give the brokers in the source's \"brokers\" argument.";
		else if (strcmp(key, "auto.offset.reset") == 0)
			hint = "Use the \"starting_offsets\" option to choose where a new query starts, and streamwin.reset_query() to move an existing query.";
		else
			hint = "streamwin stores Kafka offsets in PostgreSQL, in the same transaction as each batch's results, and relies on this setting for exactly-once processing.";
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kafka property \"%s\" cannot be set", key),
				 errdetail("streamwin sets this property itself."),
				 errhint("%s", hint)));
	}
	if (in_list(unsafe_properties, key))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("kafka property \"%s\" is not allowed", key),
				 errdetail("It would load code or run a command inside the database server.")));
	if (in_list(process_properties, key))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("kafka property \"%s\" is not allowed", key),
				 errdetail("librdkafka would replace the server process's handler of that signal with its own: "
						   "a shutdown, a cancel or a timeout that PostgreSQL signals would be lost.")));
	/* an empty group makes a consumer without a queue to read from */
	if (strcmp(key, "group.id") == 0 && value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kafka property \"group.id\" must not be empty"),
				 errdetail("streamwin assigns partitions itself and commits no offsets to Kafka: the group only names the client to the brokers."),
				 errhint("Leave it out, or give it a name.")));
	if (in_list(kinit_properties, key) && !shell_safe(value))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("kafka property \"%s\" may hold only letters, digits and . _ - / @ + = : , (not first: -)", key),
				 errdetail("librdkafka puts it into the kinit command it runs through the shell.")));
}

/*
 * Set one property on conf; on failure destroy conf and raise an error that
 * names the property (and, unless it might be a secret, the reason).
 */
static void
conf_set_or_error(rd_kafka_conf_t *conf, const char *key, const char *value)
{
	char		errstr[512];
	rd_kafka_conf_res_t res;

	res = rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr));
	if (res == RD_KAFKA_CONF_OK)
		return;

	rd_kafka_conf_destroy(conf);
	if (res == RD_KAFKA_CONF_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized kafka property \"%s\"", key),
				 errhint("See librdkafka's CONFIGURATION.md for the consumer properties.")));
	if (property_is_secret(key))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for kafka property \"%s\"", key)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for kafka property \"%s\"", key),
			 errdetail("%s", errstr)));
}

/*
 * Build the consumer configuration: streamwin's settings, then the user's.
 * Raises an error (after freeing everything) if a property is refused.
 */
static rd_kafka_conf_t *
build_conf(const char *brokers, int fetch_wait_ms, int prefetch_messages,
		   int nprops, const char **keys, const char **values)
{
	rd_kafka_conf_t *conf;
	int			i;

	/* Refuse before allocating anything. */
	for (i = 0; i < nprops; i++)
	{
		if (keys[i] == NULL || values[i] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("kafka property names and values must not be null")));
		check_property_allowed(keys[i], values[i]);
	}

	conf = rd_kafka_conf_new();
	if (brokers != NULL)
		conf_set_or_error(conf, "bootstrap.servers", brokers);
	conf_set_or_error(conf, "group.id", KAFKA_DEFAULT_GROUP_ID);
	conf_set_or_error(conf, "client.id", KAFKA_DEFAULT_CLIENT_ID);
	/* Offsets live in PostgreSQL: never commit or store them in Kafka. */
	conf_set_or_error(conf, "enable.auto.commit", "false");
	conf_set_or_error(conf, "enable.auto.offset.store", "false");
	/* kafka_fetch() needs to know when a partition has been read to its end. */
	conf_set_or_error(conf, "enable.partition.eof", "true");

	/*
	 * A stored offset the broker no longer has must stop the query, not be
	 * silently replaced by the earliest or latest offset: that would skip or
	 * re-read data behind the user's back.
	 */
	conf_set_or_error(conf, "auto.offset.reset", "error");
	conf_set_or_error(conf, "allow.auto.create.topics", "false");

	/*
	 * How long a broker may hold a fetch for a caught-up partition (the
	 * caller's choice, see kafka_consumer_open).  librdkafka's default is 500
	 * ms; a few idle fetch requests per second are a better trade for
	 * micro-batches.
	 */
	conf_set_or_error(conf, "fetch.wait.max.ms", psprintf("%d", fetch_wait_ms));

	/*
	 * librdkafka stops fetching every partition, and backs off for about half
	 * a second, once the consumer's queue holds queued.min.messages (100,000
	 * by default, counted over all partitions).  A batch takes up to
	 * max_records_per_batch at once, so with the default a backlog would be
	 * read in stalls, the fetcher backing off every few batches.  Keep
	 * fetching while the queue holds less than the caller asks for;
	 * queued.max.messages.kbytes (64 MB of messages) still bounds the memory
	 * it takes.
	 */
	conf_set_or_error(conf, "queued.min.messages",
					  psprintf("%d", Min(Max(prefetch_messages, 100000), 10000000)));

	/*
	 * librdkafka backs off reconnecting up to 10 s by default; after a broker
	 * outage that delays recovery by as much.  Java clients use 1 s.
	 */
	conf_set_or_error(conf, "reconnect.backoff.max.ms", "1000");
	/*
	 * A batch waits on every request it makes (metadata, end offsets,
	 * fetches), and a new session's first batch makes several on new
	 * connections: with Nagle's algorithm, a request written while another
	 * is unacknowledged waits for the broker's delayed acknowledgement (40
	 * ms on Linux).  Java clients and brokers turn it off too; a property
	 * set on the source can turn it back on.
	 */
	conf_set_or_error(conf, "socket.nagle.disable", "true");
	/* Log lines are queued for us instead of logged from librdkafka threads. */
	conf_set_or_error(conf, "log.queue", "true");

	for (i = 0; i < nprops; i++)
		conf_set_or_error(conf, keys[i], values[i]);
	/* (a source made before they were refused at its creation) */
	for (const char *const *key = unread_properties; *key; key++)
		conf_set_or_error(conf, *key, "0");

	return conf;
}

/*
 * kafka_validate_properties
 *		See kafka_consumer.h.
 */
/* Would a consumer of conf authenticate with Kerberos (SASL's GSSAPI)? */
static bool
uses_kerberos(rd_kafka_conf_t *conf)
{
	char		protocol[64];
	char		mechanisms[256];
	size_t		size = sizeof(protocol);

	if (rd_kafka_conf_get(conf, "security.protocol", protocol, &size) != RD_KAFKA_CONF_OK ||
		pg_strncasecmp(protocol, "sasl", 4) != 0)
		return false;
	size = sizeof(mechanisms);
	if (rd_kafka_conf_get(conf, "sasl.mechanisms", mechanisms, &size) != RD_KAFKA_CONF_OK)
		return true;			/* (too long to be one we know) */
	return pg_strcasecmp(mechanisms, "GSSAPI") == 0;
}

void
kafka_validate_properties(int nprops, const char **keys, const char **values)
{
	rd_kafka_conf_t *conf;
	bool		kerberos;
	int			i;

	conf = build_conf(NULL, KAFKA_DEFAULT_FETCH_WAIT_MS, 0, nprops, keys, values);
	kerberos = uses_kerberos(conf);
	rd_kafka_conf_destroy(conf);

	/*
	 * GSSAPI, librdkafka's default SASL mechanism, authenticates with the
	 * Kerberos credentials of the server's operating system user (its
	 * ticket cache, its default keytab), not with any the role gives: like
	 * reading the server's files.
	 */
	if (kerberos && !has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to authenticate to Kafka with Kerberos (SASL mechanism GSSAPI)"),
				 errdetail("GSSAPI authenticates with the Kerberos credentials of the server's operating system user; only roles with privileges of the \"%s\" role may use them.",
						   "pg_read_server_files"),
				 errhint("Set \"sasl.mechanisms\" to one that takes the role's own credentials (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), or have such a role create the source.")));

	for (i = 0; i < nprops; i++)
	{
		if (in_list(unread_properties, keys[i]) && strcmp(values[i], "0") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("kafka property \"%s\" cannot be set", keys[i]),
					 errdetail("librdkafka would queue a statistics document at every interval for a callback that streamwin does not install; nothing would read them."),
					 errhint("Read librdkafka's statistics in a client outside the database.")));
		if (property_reads_file(keys[i], values[i]) &&
			!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to set kafka property \"%s\"",
							keys[i]),
					 errdetail("Only roles with privileges of the \"%s\" role may set properties that make the server read a file.",
							   "pg_read_server_files")));
	}
}

/* ---------------------------------------------------------------------
 * Opening and closing
 * ---------------------------------------------------------------------
 */

static void
exit_cleanup(int code, Datum arg)
{
	while (open_consumers != NULL)
		consumer_destroy(open_consumers);
}

/*
 * kafka_consumer_open
 *		See kafka_consumer.h.
 */
KafkaConsumer *
kafka_consumer_open(const char *brokers, const char *topic, int fetch_wait_ms,
					int prefetch_messages, int nprops, const char **keys,
					const char **values)
{
	KafkaConsumer *c;
	rd_kafka_conf_t *conf;
	char		errstr[512];
	int			fds[2];

	if (brokers == NULL || brokers[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kafka broker list must not be empty")));
	if (topic == NULL || topic[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kafka topic name must not be empty")));

	if (!exit_callback_registered)
	{
		on_proc_exit(exit_cleanup, (Datum) 0);
		exit_callback_registered = true;
	}

	/*
	 * Everything that can fail with an error comes before the first
	 * allocation that would then leak, or cleans up before raising it.
	 */
	conf = build_conf(brokers, fetch_wait_ms, prefetch_messages, nprops, keys, values);

	c = calloc(1, sizeof(KafkaConsumer));
	if (c == NULL || (c->topic = strdup(topic)) == NULL)
	{
		free(c);
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	c->owner = pthread_self();
	c->wakeup_rfd = c->wakeup_wfd = -1;

	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
	{
		int			save_errno = errno;

		free(c->topic);
		free(c);
		rd_kafka_conf_destroy(conf);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pipe for kafka consumer: %m")));
	}
	c->wakeup_rfd = fds[0];
	c->wakeup_wfd = fds[1];

	rd_kafka_conf_set_opaque(conf, c);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_log_cb(conf, log_cb);

	/* On success rd_kafka_new() takes ownership of conf. */
	kafka_sasl_prepare(conf);
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
	if (c->rk == NULL)
	{
		rd_kafka_conf_destroy(conf);
		close(c->wakeup_rfd);
		close(c->wakeup_wfd);
		free(c->topic);
		free(c);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not create kafka consumer: %s", errstr)));
	}

	/*
	 * From here on the consumer is complete enough for consumer_destroy(), so
	 * put it on the list of open consumers first.
	 */
	c->next = open_consumers;
	open_consumers = c;

	rd_kafka_set_log_queue(c->rk, NULL);	/* NULL: the main queue */
	c->mainq = rd_kafka_queue_get_main(c->rk);
	c->queue = rd_kafka_queue_get_consumer(c->rk);
	c->rkt = rd_kafka_topic_new(c->rk, topic, NULL);
	if (c->mainq == NULL || c->queue == NULL || c->rkt == NULL)
	{
		consumer_destroy(c);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not set up kafka consumer for topic \"%s\"",
						topic)));
	}
	rd_kafka_queue_io_event_enable(c->queue, c->wakeup_wfd, "c", 1);
	rd_kafka_queue_io_event_enable(c->mainq, c->wakeup_wfd, "m", 1);

	return c;
}

/* Free the current batch's messages. */
static void
release_batch(KafkaConsumer *c)
{
	int			i;

	for (i = 0; i < c->nmsgs; i++)
		rd_kafka_message_destroy(c->rkmsgs[i]);
	c->nmsgs = 0;
}

/*
 * Unlink the consumer from the open list and free everything.  Never raises
 * an error, so it can run in error cleanup and at process exit.
 */
static void
consumer_destroy(KafkaConsumer *c)
{
	KafkaConsumer **link;

	for (link = &open_consumers; *link != NULL; link = &(*link)->next)
	{
		if (*link == c)
		{
			*link = c->next;
			break;
		}
	}

	/* librdkafka waits for outstanding messages before it lets go. */
	release_batch(c);
	drop_held(c);
	for (int p = 0; p < c->nparts; p++)
		free(c->parts[p].held);

	if (c->queue)
		rd_kafka_queue_io_event_enable(c->queue, -1, NULL, 0);
	if (c->mainq)
		rd_kafka_queue_io_event_enable(c->mainq, -1, NULL, 0);

	/* Stops fetching; quick, as we never joined a group. */
	rd_kafka_consumer_close(c->rk);

	if (c->rkt)
		rd_kafka_topic_destroy(c->rkt);
	if (c->queue)
		rd_kafka_queue_destroy(c->queue);
	if (c->mainq)
		rd_kafka_queue_destroy(c->mainq);
	rd_kafka_destroy(c->rk);

	close(c->wakeup_rfd);
	close(c->wakeup_wfd);
	free(c->parts);
	free(c->rkmsgs);
	free(c->msgs);
	free(c->topic);
	free(c);
}

/*
 * kafka_consumer_close
 *		See kafka_consumer.h.
 */
void
kafka_consumer_close(KafkaConsumer *c)
{
	if (c != NULL)
		consumer_destroy(c);
}

/* ---------------------------------------------------------------------
 * Metadata and watermarks
 * ---------------------------------------------------------------------
 */

/*
 * Raise an error for a failed request to the cluster, with the most
 * specific text we have: librdkafka's error events usually say more (e.g.
 * "Connection refused") than the request's own "timed out".
 */
static void
report_request_error(KafkaConsumer *c, rd_kafka_resp_err_t err,
					 const char *what)
{
	serve_events(c);

	if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
		err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("kafka topic \"%s\" does not exist", c->topic)));
	if (err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("not authorized to read kafka topic \"%s\"", c->topic),
				 errdetail("%s", rd_kafka_err2str(err))));
	if (c->last_error[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not %s for kafka topic \"%s\": %s",
						what, c->topic, rd_kafka_err2str(err)),
				 errdetail("Last error reported by the Kafka client: %s",
						   c->last_error)));
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not %s for kafka topic \"%s\": %s",
					what, c->topic, rd_kafka_err2str(err))));
}

/*
 * kafka_partition_count
 *		See kafka_consumer.h.
 */
/* The topic's partition count, or -1 with *err set */
static int
partition_count(KafkaConsumer *c, int timeout_ms, rd_kafka_resp_err_t *err)
{
	const struct rd_kafka_metadata *md;
	int			count;
	RequestSlices sl;
	int			slice;

	slices_begin(&sl, timeout_ms);
	while ((slice = slices_next(&sl)) > 0)
	{
		*err = rd_kafka_metadata(c->rk, 0, c->rkt, &md, slice);
		if (!request_waits(*err))
			break;
	}
	if (*err != RD_KAFKA_RESP_ERR_NO_ERROR)
		return -1;
	if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		*err = md->topic_cnt != 1 ? RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
			: md->topics[0].err;
		rd_kafka_metadata_destroy(md);
		return -1;
	}
	count = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	serve_events(c);
	return count;
}

int
kafka_partition_count(KafkaConsumer *c, int timeout_ms)
{
	rd_kafka_resp_err_t err;
	int			count = partition_count(c, timeout_ms, &err);

	if (count < 0)
		report_request_error(c, err, "get metadata");
	return count;
}

/*
 * kafka_try_partition_count
 *		See kafka_consumer.h.
 */
int
kafka_try_partition_count(KafkaConsumer *c, int timeout_ms)
{
	rd_kafka_resp_err_t err;

	return partition_count(c, timeout_ms, &err);
}

/*
 * The high watermark hi the broker answered for partition p: an end
 * reported before the messages the broker holds now is no end (fetches
 * wait for them rather than take the partition as read, and so does an
 * end still queued from before, see handle_event).
 */
static void
learn_end(KafkaConsumer *c, int32 partition, int64 hi)
{
	KafkaPartitionState *ps = partition_state(c, partition);

	if (ps == NULL)
		return;
	ps->known_end = Max(ps->known_end, hi);
	if (ps->eof && ps->next_offset < hi)
	{
		ps->eof = false;
		c->neof--;
	}
}

/*
 * The end offsets of n partitions into ends[] (one ListOffsets request per
 * broker, for the latest offset of each), each learned (learn_end).  On
 * an error: raised if raise_errors, else false, ends[] all -1.
 */
static bool
query_ends(KafkaConsumer *c, int n, const int32 *partitions, int64 *ends, int timeout_ms,
		   bool raise_errors)
{
	rd_kafka_topic_partition_list_t *list = NULL;
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
	int32		missing = -1;
	RequestSlices sl;
	int			slice;

	for (int i = 0; i < n; i++)
		ends[i] = -1;
	if (n == 0)
		return true;
	/* in slices (request_waits), each with the list anew: a request writes its answers into it */
	slices_begin(&sl, timeout_ms);
	while ((slice = slices_next(&sl)) > 0)
	{
		list = rd_kafka_topic_partition_list_new(n);
		for (int i = 0; i < n; i++)
			rd_kafka_topic_partition_list_add(list, c->topic, partitions[i])->offset = RD_KAFKA_OFFSET_END;
		err = rd_kafka_offsets_for_times(c->rk, list, slice);
		if (!request_waits(err))
			break;
		rd_kafka_topic_partition_list_destroy(list);
		list = NULL;
	}
	for (int i = 0; err == RD_KAFKA_RESP_ERR_NO_ERROR && i < n; i++)
	{
		rd_kafka_topic_partition_t *tp = &list->elems[i];

		if (tp->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
			missing = tp->partition;
		if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR)
			err = tp->err;
		else if (tp->offset < 0)
			err = RD_KAFKA_RESP_ERR__BAD_MSG;
		else
			ends[i] = tp->offset;
	}
	if (list != NULL)
		rd_kafka_topic_partition_list_destroy(list);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		for (int i = 0; i < n; i++)
			ends[i] = -1;
		if (!raise_errors)
		{
			elog(DEBUG1, "kafka consumer for topic \"%s\": could not query end offsets: %s",
				 c->topic, rd_kafka_err2str(err));
			return false;
		}
		if (missing >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("kafka topic \"%s\" has no partition %d", c->topic, missing)));
		report_request_error(c, err, "query end offsets");
	}
	for (int i = 0; i < n; i++)
		learn_end(c, partitions[i], ends[i]);
	serve_events(c);
	return true;
}

/*
 * kafka_query_ends
 *		See kafka_consumer.h.
 */
void
kafka_query_ends(KafkaConsumer *c, int n, const int32 *partitions, int64 *ends, int timeout_ms)
{
	(void) query_ends(c, n, partitions, ends, timeout_ms, true);
}

/*
 * kafka_try_query_ends
 *		See kafka_consumer.h.
 */
bool
kafka_try_query_ends(KafkaConsumer *c, int n, const int32 *partitions, int64 *ends,
					 int timeout_ms)
{
	return query_ends(c, n, partitions, ends, timeout_ms, false);
}

/*
 * kafka_query_watermarks
 *		See kafka_consumer.h.
 */
void
kafka_query_watermarks(KafkaConsumer *c, int32 partition, int64 *low,
					   int64 *high, int timeout_ms)
{
	int64_t		lo;
	int64_t		hi;
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
	RequestSlices sl;
	int			slice;

	slices_begin(&sl, timeout_ms);
	while ((slice = slices_next(&sl)) > 0)
	{
		err = rd_kafka_query_watermark_offsets(c->rk, c->topic, partition, &lo, &hi, slice);
		if (!request_waits(err))
			break;
	}
	if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("kafka topic \"%s\" has no partition %d",
						c->topic, partition)));
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		report_request_error(c, err, "query watermarks");
	serve_events(c);
	learn_end(c, partition, hi);
	*low = lo;
	*high = hi;
}

/*
 * kafka_cached_high_watermark
 *		See kafka_consumer.h.
 */
int64
kafka_cached_high_watermark(KafkaConsumer *c, int32 partition)
{
	int64_t		lo;
	int64_t		hi;

	KafkaPartitionState *ps;

	if (rd_kafka_get_watermark_offsets(c->rk, c->topic, partition,
									   &lo, &hi) == RD_KAFKA_RESP_ERR_NO_ERROR &&
		hi >= 0)
		return hi;
	/* no fetch response yet: what the broker answered when asked, if asked */
	ps = partition_state(c, partition);
	return ps != NULL ? ps->known_end : -1;
}

/*
 * kafka_learn_ends
 *		See kafka_consumer.h.
 */
void
kafka_learn_ends(KafkaConsumer *c, int n, const int32 *partitions, const int64 *ends)
{
	for (int i = 0; i < n; i++)
	{
		KafkaPartitionState *ps = partition_state(c, partitions[i]);

		if (ends[i] < 0 || ps == NULL)
			continue;
		learn_end(c, partitions[i], ends[i]);

		/*
		 * A partition assigned at its end has nothing for the first fetch to
		 * bring, which the broker would hold for fetch.wait.max.ms before it
		 * answered with that end: it is at its end now, as if the fetch had
		 * said so (messages produced since come with the next fetches, as
		 * after any end).  A position past the end is left to the fetch,
		 * which reports it.
		 */
		if (ps->assigned && !ps->heard && !ps->eof && ps->nheld == 0 &&
			ps->next_offset == ends[i])
		{
			ps->heard = true;
			ps->eof = true;
			c->neof++;
		}
	}
}

/* ---------------------------------------------------------------------
 * Assignment
 * ---------------------------------------------------------------------
 */

/*
 * kafka_assign
 *		See kafka_consumer.h.
 */
void
kafka_assign(KafkaConsumer *c, int n, const int32 *partitions,
			 const int64 *offsets)
{
	rd_kafka_topic_partition_list_t *list;
	rd_kafka_resp_err_t err;
	int32		maxpart = -1;
	int			i;

	/* Validate everything before changing anything. */
	if (n < 0)
		elog(ERROR, "invalid number of kafka partitions: %d", n);
	for (i = 0; i < n; i++)
	{
		int			j;

		if (partitions[i] < 0 || partitions[i] > KAFKA_MAX_PARTITION)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid kafka partition number %d",
							partitions[i])));
		if (offsets[i] < 0 && offsets[i] != KAFKA_OFFSET_EARLIEST &&
			offsets[i] != KAFKA_OFFSET_LATEST)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid kafka offset " INT64_FORMAT " for partition %d",
							offsets[i], partitions[i])));
		for (j = 0; j < i; j++)
			if (partitions[j] == partitions[i])
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("kafka partition %d assigned twice",
								partitions[i])));
		maxpart = Max(maxpart, partitions[i]);
	}

	/* Make room for the per-partition state while nothing has changed yet. */
	if (maxpart >= c->nparts)
	{
		KafkaPartitionState *parts;
		int			newlen = maxpart + 1;

		parts = realloc(c->parts, newlen * sizeof(KafkaPartitionState));
		if (parts == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		memset(parts + c->nparts, 0,
			   (newlen - c->nparts) * sizeof(KafkaPartitionState));
		for (int p = c->nparts; p < newlen; p++)
			parts[p].limit = -1;
		c->parts = parts;
		c->nparts = newlen;
	}

	/* The caller's messages belong to the old assignment: let them go. */
	release_batch(c);
	drop_held(c);

	list = rd_kafka_topic_partition_list_new(Max(n, 1));
	for (i = 0; i < n; i++)
	{
		rd_kafka_topic_partition_t *tp;

		tp = rd_kafka_topic_partition_list_add(list, c->topic, partitions[i]);
		if (offsets[i] == KAFKA_OFFSET_EARLIEST)
			tp->offset = RD_KAFKA_OFFSET_BEGINNING;
		else if (offsets[i] == KAFKA_OFFSET_LATEST)
			tp->offset = RD_KAFKA_OFFSET_END;
		else
			tp->offset = offsets[i];
	}

	/*
	 * Replacing the assignment stops fetching for the old one and bumps each
	 * partition's op version, so that librdkafka itself drops anything
	 * already fetched for it, including messages sitting in our queue.  The
	 * per-partition next_offset check in kafka_fetch() backs that up.
	 */
	err = rd_kafka_assign(c->rk, list);
	rd_kafka_topic_partition_list_destroy(list);

	/* Whatever happened, the old state is gone. */
	for (i = 0; i < c->nparts; i++)
		c->parts[i].assigned = false;
	c->nassigned = 0;
	c->neof = 0;
	c->pending_err = RD_KAFKA_RESP_ERR_NO_ERROR;

	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not assign partitions of kafka topic \"%s\": %s",
						c->topic, rd_kafka_err2str(err))));

	for (i = 0; i < n; i++)
	{
		KafkaPartitionState *ps = &c->parts[partitions[i]];

		ps->assigned = true;
		ps->eof = false;
		ps->heard = false;
		ps->next_offset = offsets[i] >= 0 ? offsets[i] : -1;
		ps->known_end = -1;
	}
	c->nassigned = n;
	c->assigned_at = monotonic_ms();
	c->assignment_verified = (n == 0);
}

/* ---------------------------------------------------------------------
 * Fetching
 * ---------------------------------------------------------------------
 */

/*
 * Raise the error for a per-partition error event or for an error recorded
 * by error_cb.  The text is copied to the stack first, since the caller
 * frees the event.
 */
static void
report_partition_error(KafkaConsumer *c, rd_kafka_resp_err_t err,
					   int32 partition, int64 offset, const char *errtext)
{
	char		detail[1024];

	strlcpy(detail, errtext, sizeof(detail));

	switch (err)
	{
		case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
		case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
			{
				int64_t		lo = -1;
				int64_t		hi = -1;

				(void) rd_kafka_get_watermark_offsets(c->rk, c->topic,
													  partition, &lo, &hi);
				ereport(ERROR,
						(errcode(ERRCODE_KAFKA_OFFSET_OUT_OF_RANGE),
						 errmsg("offset " INT64_FORMAT " is out of range for partition %d of kafka topic \"%s\"",
								offset, partition, c->topic),
						 lo >= 0 && hi > lo ?
						 errdetail("The partition holds offsets " INT64_FORMAT " to " INT64_FORMAT " only (%s).",
								   (int64) lo, (int64) hi - 1, detail) :
						 lo >= 0 && hi == lo ?
						 errdetail("The partition holds no messages; the next one will get offset " INT64_FORMAT " (%s).",
								   (int64) hi, detail) :
						 errdetail("The broker does not hold that offset (%s).",
								   detail),
						 errhint("Messages were probably deleted by retention before the query read them, or the topic was recreated. Use streamwin.reset_query() to restart the query from offsets that exist; messages that are gone cannot be processed.")));
				break;
			}
		case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
		case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("kafka topic \"%s\" does not exist", c->topic),
					 errdetail("%s", detail)));
			break;
		case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("an assigned partition does not exist in kafka topic \"%s\"",
							c->topic),
					 errdetail("%s", detail),
					 errhint("Check the source's \"partitions\" option against the topic's partition count.")));
			break;
		case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("not authorized to read kafka topic \"%s\"",
							c->topic),
					 errdetail("%s", detail)));
			break;
		case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("not authorized to use the kafka consumer group for topic \"%s\"",
							c->topic),
					 errdetail("%s", detail),
					 errhint("Set the kafka property \"group.id\" to a group this client may use. streamwin never joins the group nor commits offsets to it, but librdkafka needs one.")));
			break;
		default:
			if (partition >= 0)
				ereport(ERROR,
						(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
						 errmsg("could not fetch from partition %d of kafka topic \"%s\": %s",
								partition, c->topic, rd_kafka_err2name(err)),
						 errdetail("%s", detail)));
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not fetch from kafka topic \"%s\": %s",
							c->topic, rd_kafka_err2name(err)),
					 errdetail("%s", detail)));
	}
}

/* Raise the error recorded by error_cb, if any. */
static void
raise_pending_error(KafkaConsumer *c)
{
	rd_kafka_resp_err_t err = c->pending_err;

	if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
		return;
	c->pending_err = RD_KAFKA_RESP_ERR_NO_ERROR;
	report_partition_error(c, err, -1, -1, c->pending_errstr);
}

/*
 * Is a per-partition error event something librdkafka recovers from by
 * itself?  Those are remembered, not raised.
 */
static bool
transient_consumer_error(rd_kafka_resp_err_t err)
{
	switch (err)
	{
		case RD_KAFKA_RESP_ERR__TRANSPORT:
		case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
		case RD_KAFKA_RESP_ERR__TIMED_OUT:
		case RD_KAFKA_RESP_ERR__RESOLVE:
		case RD_KAFKA_RESP_ERR__MAX_POLL_EXCEEDED:
		case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
		case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
		case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
		case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
		case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
		case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
		case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
		case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
			return true;
		default:
			return false;
	}
}

/* A fatal per-partition event, copied out of the event before it is freed. */
typedef struct KafkaFatalEvent
{
	rd_kafka_resp_err_t err;
	int32		partition;
	int64		offset;
	char		errtext[1024];
} KafkaFatalEvent;

/*
 * Handle one event (an rkmessage with err set) from the consumer queue, and
 * free it.  Returns true if the event must fail the fetch, with what to
 * report in *fatal; the caller raises the error once it has made sure that
 * nothing is left unowned.
 */
static bool
handle_event(KafkaConsumer *c, rd_kafka_message_t *m, KafkaFatalEvent *fatal)
{
	KafkaPartitionState *ps = partition_state(c, m->partition);
	rd_kafka_resp_err_t err = m->err;
	int32		partition = m->partition;
	int64		offset = m->offset;
	char		errtext[1024];

	if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
	{
		rd_kafka_message_destroy(m);
		if (ps == NULL || (ps->next_offset >= 0 && offset < ps->next_offset))
			return false;		/* belongs to an older assignment */
		ps->heard = true;
		/* A fetch response came back, so the cluster is reachable. */
		c->conn_suspect = false;
		/* reported before messages the broker holds: more is on its way */
		if (offset < ps->known_end)
			return false;
		if (!ps->eof)
		{
			ps->eof = true;
			c->neof++;
		}
		ps->next_offset = offset;
		return false;
	}

	strlcpy(errtext, rd_kafka_message_errstr(m), sizeof(errtext));
	rd_kafka_message_destroy(m);
	set_last_error(c, errtext);

	if (transient_consumer_error(err))
		return false;
	if (ps == NULL && partition >= 0 &&
		err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
		err != RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
	{
		/* An error about a partition we no longer read: not ours to raise. */
		elog(DEBUG1, "kafka consumer for topic \"%s\": ignoring error for unassigned partition %d: %s",
			 c->topic, partition, errtext);
		return false;
	}

	fatal->err = err;
	fatal->partition = partition;
	fatal->offset = offset;
	strlcpy(fatal->errtext, errtext, sizeof(fatal->errtext));
	return true;
}

/*
 * Take what the consumer queue holds now, up to the batch's capacity, into
 * the current batch.  Returns the number of queue entries taken (messages
 * and events); raises an error for a fatal event.
 */
static void deliver(KafkaConsumer *c, KafkaPartitionState *ps, rd_kafka_message_t *m);

static int
take_available(KafkaConsumer *c, int max_records)
{
	ssize_t		got;
	int			start = c->nmsgs;
	int			i;

	/*
	 * Store straight into the owned array: if an event below raises an error,
	 * everything taken so far is either kept there or freed.
	 */
	got = rd_kafka_consume_batch_queue(c->queue, 0, c->rkmsgs + start,
									   max_records - start);
	if (got < 0)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not consume from kafka topic \"%s\": %s",
						c->topic, rd_kafka_err2str(rd_kafka_last_error()))));

	for (i = start; i < start + got; i++)
	{
		rd_kafka_message_t *m = c->rkmsgs[i];
		KafkaPartitionState *ps;

		if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
		{
			KafkaFatalEvent fatal;
			int			j;

			/* Events are not part of the batch. */
			if (!handle_event(c, m, &fatal))
				continue;

			/*
			 * Fatal: the batch fails, so the entries after this one will not
			 * be used; free them before raising the error.
			 */
			for (j = i + 1; j < start + got; j++)
				rd_kafka_message_destroy(c->rkmsgs[j]);
			report_partition_error(c, fatal.err, fatal.partition,
								   fatal.offset, fatal.errtext);
		}

		ps = partition_state(c, m->partition);
		if (ps == NULL || m->offset < ps->next_offset)
		{
			/*
			 * Fetched for an older assignment, or already delivered since the
			 * last kafka_assign(): never hand it out twice.
			 */
			c->stale_dropped++;
			rd_kafka_message_destroy(m);
			continue;
		}
		ps->heard = true;
		c->conn_suspect = false;
		if (ps->nheld > 0 || ps->limit == 0)
		{
			/* past this fetch's share of the partition: a later one's */
			ps->next_offset = m->offset + 1;
			if (!hold_message(c, ps, m))
			{
				for (int j = i + 1; j < start + got; j++)
					rd_kafka_message_destroy(c->rkmsgs[j]);
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory")));
			}
			continue;
		}
		if (ps->eof)
		{
			ps->eof = false;
			c->neof--;
		}
		deliver(c, ps, m);
	}
	return (int) got;
}

/* Put message m of partition ps into the current batch. */
static void
deliver(KafkaConsumer *c, KafkaPartitionState *ps, rd_kafka_message_t *m)
{
	KafkaMessage *km;

	ps->next_offset = Max(ps->next_offset, m->offset + 1);
	if (ps->limit > 0)
		ps->limit--;
	{
		c->rkmsgs[c->nmsgs] = m;
		km = &c->msgs[c->nmsgs];
		km->partition = m->partition;
		km->offset = m->offset;
		km->payload = m->payload;
		km->len = m->payload ? m->len : 0;
		km->key = m->key;
		km->keylen = m->key ? m->key_len : 0;
		{
			/* milliseconds since the Unix epoch, or -1 */
			int64		ms = rd_kafka_message_timestamp(m, NULL);

			km->has_timestamp = ms >= 0;
			km->timestamp = ms * 1000 -
				(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
		}
		km->rkmessage = m;
		km->headers_json = NULL;
		km->headers_error = NULL;
		c->nmsgs++;
	}
}

/*
 * The messages held from earlier fetches come first, in partition order
 * and within each in offset order, as far as this fetch's limits let them.
 */
static void
take_held(KafkaConsumer *c, int max_records)
{
	for (int p = 0; p < c->nparts && c->nmsgs < max_records; p++)
	{
		KafkaPartitionState *ps = &c->parts[p];

		while (ps->assigned && ps->nheld > 0 && ps->limit != 0 && c->nmsgs < max_records)
			deliver(c, ps, unhold_message(c, ps));
	}
}

/*
 * Has this fetch taken all it can, short of its size: every assigned
 * partition is at its end or at its limit?
 */
static bool
fetch_complete(KafkaConsumer *c)
{
	if (c->neof == c->nassigned)
		return true;
	for (int p = 0; p < c->nparts; p++)
	{
		KafkaPartitionState *ps = &c->parts[p];

		if (ps->assigned && ps->limit != 0 && !(ps->eof && ps->nheld == 0))
			return false;
	}
	return true;
}

void
kafka_limit_next_fetch(KafkaConsumer *c, int n, const int32 *partitions, const int *limits)
{
	for (int i = 0; i < n; i++)
	{
		KafkaPartitionState *ps = partition_state(c, partitions[i]);

		if (ps != NULL)
			ps->limit = limits[i];
	}
}

/*
 * Check with a metadata request that some broker answers and, if
 * check_partitions, that the topic and every assigned partition that has not
 * been heard from exist.  Raises an error if not.
 *
 * Used when a fetch got nothing although librdkafka reported connection
 * trouble (librdkafka keeps retrying for ever, so without this a dead
 * cluster would look like an idle topic), and when an assigned partition
 * stays silent (librdkafka reports a nonexistent partition only when it
 * next refreshes the topic's metadata, which can take minutes).
 */
static void
check_cluster(KafkaConsumer *c, bool check_partitions)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t err;
	int			partition_cnt;
	int			p;

	err = rd_kafka_metadata(c->rk, 0, c->rkt, &md, KAFKA_PROBE_TIMEOUT_MS);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		serve_events(c);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not fetch from kafka topic \"%s\": no broker is reachable",
						c->topic),
				 c->last_error[0] != '\0' ?
				 errdetail("Last error reported by the Kafka client: %s",
						   c->last_error) :
				 errdetail("Metadata request failed: %s",
						   rd_kafka_err2str(err))));
	}
	c->conn_suspect = false;

	if (!check_partitions)
	{
		rd_kafka_metadata_destroy(md);
		return;
	}

	err = md->topic_cnt == 1 ? md->topics[0].err
		: RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
	partition_cnt = md->topic_cnt == 1 ? md->topics[0].partition_cnt : 0;
	rd_kafka_metadata_destroy(md);

	if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
		err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
		report_partition_error(c, err, -1, -1, rd_kafka_err2str(err));
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		return;					/* e.g. being created: look again later */

	for (p = 0; p < c->nparts; p++)
	{
		KafkaPartitionState *ps = &c->parts[p];

		if (ps->assigned && !ps->heard && p >= partition_cnt)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("partition %d of kafka topic \"%s\" does not exist",
							p, c->topic),
					 errdetail("The topic has %d partitions.", partition_cnt),
					 errhint("Check the source's \"partitions\" option against the topic's partition count.")));
	}
	c->assignment_verified = true;
}

/* Is there an assigned partition that has sent nothing since assigned? */
static bool
some_partition_unheard(KafkaConsumer *c)
{
	int			p;

	for (p = 0; p < c->nparts; p++)
		if (c->parts[p].assigned && !c->parts[p].heard)
			return true;
	return false;
}

/* Empty the wake-up pipe. */
static void
drain_pipe(KafkaConsumer *c)
{
	char		buf[64];

	while (read(c->wakeup_rfd, buf, sizeof(buf)) > 0)
		;
}

/*
 * kafka_fetch
 *		See kafka_consumer.h.
 */
int
kafka_fetch(KafkaConsumer *c, int max_records, int timeout_ms, int linger_ms,
			KafkaMessage **msgs)
{
	int64		deadline;
	int64		linger_deadline = 0;
	bool		limited;
	bool		latch_was_set = false;

	if (max_records <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("maximum number of records per batch must be positive")));

	release_batch(c);
	*msgs = c->msgs;
	c->have_last_error = false;

	if (max_records > c->capacity)
	{
		rd_kafka_message_t **rkmsgs;
		KafkaMessage *kmsgs;

		rkmsgs = malloc_or_error(max_records * sizeof(rd_kafka_message_t *));
		kmsgs = malloc(max_records * sizeof(KafkaMessage));
		if (kmsgs == NULL)
		{
			free(rkmsgs);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		}
		free(c->rkmsgs);
		free(c->msgs);
		c->rkmsgs = rkmsgs;
		c->msgs = kmsgs;
		c->capacity = max_records;
		*msgs = c->msgs;
	}

	serve_events(c);
	raise_pending_error(c);
	if (c->nassigned == 0)
		return 0;
	take_held(c, max_records);
	limited = false;
	for (int p = 0; p < c->nparts; p++)
		if (c->parts[p].assigned && c->parts[p].limit >= 0)
			limited = true;

	deadline = monotonic_ms() + Max(timeout_ms, 0);
	for (;;)
	{
		int			taken;
		int64		remaining;
		int			rc;

		/*
		 * Empty the pipe before looking at the queues: an entry queued after
		 * this point writes to the pipe again, so the wait below cannot miss
		 * it.
		 */
		drain_pipe(c);
		taken = take_available(c, max_records);
		serve_events(c);
		raise_pending_error(c);

		if (c->nmsgs >= max_records || (limited && fetch_complete(c)))
			break;
		/* a batch cut across partitions holds back at most so much */
		if (limited && c->held_bytes >= KAFKA_MAX_HELD_BYTES)
			break;
		if (taken > 0)
			continue;			/* take the rest of what is there */

		/*
		 * The queue is empty.  Done when every partition is at its end.
		 * Otherwise more may be on its way in the next fetch response: once
		 * something was taken, linger briefly for it, so that a batch holds
		 * what the broker has now rather than one response's worth.
		 */
		if (fetch_complete(c))
			break;

		/*
		 * A batch cut across partitions waits for each partition's share
		 * (which a backlog has behind): up to the timeout, not just a linger,
		 * or it would hold the partitions whose responses came first.
		 */
		if (c->nmsgs > 0 && linger_ms <= 0 && !limited)
			break;
		if (c->nmsgs > 0 && linger_deadline == 0 && !limited)
			linger_deadline = monotonic_ms() + linger_ms;
		remaining = (linger_deadline != 0 ? Min(linger_deadline, deadline) : deadline) -
			monotonic_ms();
		if (remaining <= 0)
			break;

		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_SOCKET_READABLE |
							   WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							   c->wakeup_rfd, (long) remaining,
							   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			latch_was_set = true;
			CHECK_FOR_INTERRUPTS();
		}
	}

	/*
	 * A latch set while the fetch waited was for the caller too (a worker
	 * asked to stop or to reload its settings before its next wait): set it
	 * again, or the worker would sleep through its trigger interval first.
	 */
	if (latch_was_set)
		SetLatch(MyLatch);

	/* the limits were for this fetch */
	for (int p = 0; p < c->nparts; p++)
		c->parts[p].limit = -1;

	if (c->stale_dropped > 0)
	{
		/* Expected to stay 0: librdkafka drops these itself. */
		elog(DEBUG1, "kafka consumer for topic \"%s\": dropped " UINT64_FORMAT " message(s) fetched before the last assignment or already delivered",
			 c->topic, c->stale_dropped);
		c->stale_dropped = 0;
	}

	if (c->nmsgs == 0 && c->conn_suspect)
		check_cluster(c, false);
	/*
	 * The metadata request queues behind a fetch the broker holds on the
	 * same connection (an idle partition's, up to fetch.wait.max.ms): a
	 * fetch that may not wait (timeout 0, a join's first look at each of its
	 * sources) leaves the check to one that may, or to when it is overdue.
	 */
	if (!c->assignment_verified && some_partition_unheard(c) &&
		((c->nmsgs == 0 && timeout_ms > 0) ||
		 monotonic_ms() - c->assigned_at >= KAFKA_VERIFY_AFTER_MS))
		check_cluster(c, true);

	/*
	 * Messages held back for the next fetch are data waiting as much as
	 * those in librdkafka's queues: the wakeup descriptor says so, or a
	 * worker would wait its trigger interval (or a second) for them.
	 */
	if (c->held_bytes > 0 && write(c->wakeup_wfd, "h", 1) < 0)
	{
		/* The pipe is non-blocking; a full pipe is readable already. */
	}
	return c->nmsgs;
}

/*
 * kafka_partition_at_eof
 *		See kafka_consumer.h.
 */
bool
kafka_partition_at_eof(KafkaConsumer *c, int32 partition)
{
	KafkaPartitionState *ps = partition_state(c, partition);
	int64		hi;

	if (ps == NULL || !ps->eof || ps->nheld > 0)
		return false;

	/* A newer high watermark means librdkafka has seen more since. */
	hi = kafka_cached_high_watermark(c, partition);
	return hi < 0 || hi <= ps->next_offset;
}

/*
 * kafka_partition_eof_offset
 *		See kafka_consumer.h.
 */
int64
kafka_partition_eof_offset(KafkaConsumer *c, int32 partition)
{
	KafkaPartitionState *ps = partition_state(c, partition);

	if (ps == NULL || !ps->eof || ps->nheld > 0)
		return -1;
	return ps->next_offset;
}

/*
 * kafka_wakeup_fd
 *		See kafka_consumer.h.
 */
int
kafka_wakeup_fd(KafkaConsumer *c)
{
	return c->wakeup_rfd;
}

/*
 * kafka_drain_wakeup
 *		See kafka_consumer.h.
 *
 * librdkafka writes to the pipe only once per "non-polling period": after
 * one write it stays silent until the queue is served again.  So if entries
 * are already queued when the caller empties the pipe, nothing would wake
 * the caller's next wait.  We therefore put a byte back when the queues are
 * not empty, keeping the rule simple for callers: the descriptor is
 * readable whenever something is queued.
 */
void
kafka_drain_wakeup(KafkaConsumer *c)
{
	drain_pipe(c);
	if (rd_kafka_queue_length(c->queue) > 0 ||
		rd_kafka_queue_length(c->mainq) > 0 || c->held_bytes > 0)
	{
		if (write(c->wakeup_wfd, "r", 1) < 0)
		{
			/* The pipe is non-blocking and was just emptied; ignore. */
		}
	}
}

/*
 * kafka_last_error
 *		See kafka_consumer.h.
 */
const char *
kafka_last_error(KafkaConsumer *c)
{
	return c->have_last_error ? c->last_error : NULL;
}

/* --- Message headers ---------------------------------------------------- */

/*
 * Whether a header after the i'th has the same name: an object holds each
 * name once, the last one's value, as jsonb keeps it (a json column would
 * keep both).
 */
static bool
header_repeated_later(rd_kafka_headers_t *headers, size_t i, const char *name)
{
	const char *other;
	const void *value;
	size_t		size;

	for (size_t j = i + 1; rd_kafka_header_get_all(headers, j, &other, &value, &size) ==
		 RD_KAFKA_RESP_ERR_NO_ERROR; j++)
		if (strcmp(other, name) == 0)
			return true;
	return false;
}

char *
kafka_message_headers_json(const KafkaMessage *m, const char **error)
{
	rd_kafka_headers_t *headers = NULL;
	StringInfoData buf;
	const char *name;
	const void *value;
	size_t		size;
	int			encoding = GetDatabaseEncoding();

	*error = m->headers_error;
	if (m->headers_error != NULL)
		return NULL;
	if (m->headers_json != NULL)
		return pstrdup(m->headers_json);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	if (m->rkmessage != NULL &&
		rd_kafka_message_headers((const rd_kafka_message_t *) m->rkmessage, &headers) ==
		RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) ==
			 RD_KAFKA_RESP_ERR_NO_ERROR; i++)
		{
			if (!pg_verify_mbstr(encoding, name, (int) strlen(name), true))
			{
				*error = psprintf("a header name is not valid %s", GetDatabaseEncodingName());
				return NULL;
			}
			if (value != NULL && !pg_verify_mbstr(encoding, value, (int) size, true))
			{
				*error = psprintf("header \"%s\" is not valid %s", name, GetDatabaseEncodingName());
				return NULL;
			}
			if (header_repeated_later(headers, i, name))
				continue;		/* of repeated names the last one counts */
			if (buf.len > 1)
				appendStringInfoString(&buf, ", ");
			escape_json(&buf, name);
			appendStringInfoString(&buf, ": ");
			if (value == NULL)
				appendStringInfoString(&buf, "null");
			else
				escape_json(&buf, pnstrdup(value, size));
		}
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}
