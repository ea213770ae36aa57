/*-------------------------------------------------------------------------
 *
 * kafka_consumer.h
 *	  Reading micro-batches from a Kafka topic inside a PostgreSQL backend.
 *
 * A KafkaConsumer wraps one librdkafka consumer for one topic.  The caller
 * (the batch executor, in a query worker or in a user session) decides which
 * partitions to read and from which offsets, and stores the offsets it has
 * processed in its own tables, in the same transaction as the batch's
 * results.  Kafka consumer groups are never joined and nothing is ever
 * committed to Kafka: restarting a query is assigning the stored offsets
 * again, which is what makes the source replayable for exactly-once.
 *
 * Threads: librdkafka runs its own threads, but they never call into
 * PostgreSQL.  Logs and error events are queued by librdkafka and handed to
 * our callbacks only while this module polls, on the backend's own thread.
 *
 * Memory: a consumer is allocated with malloc(), not palloc(), because a
 * worker keeps it across many transactions.  The messages returned by
 * kafka_fetch() belong to the consumer and stay valid until the next
 * kafka_fetch(), kafka_assign() or kafka_consumer_close() on it, so an
 * ERROR in the middle of a batch leaks nothing as long as the consumer is
 * eventually closed.  A caller that opens a consumer for a single call
 * (e.g. run_batch in a user session) must close it in PG_FINALLY; consumers
 * still open at process exit are destroyed by an exit callback.
 *
 * Blocking: kafka_fetch() waits on the process latch and serves interrupts
 * (it may therefore reset MyLatch: callers re-check their own wake-up
 * conditions after it returns, as usual).  kafka_partition_count(),
 * kafka_query_watermarks() and the end offsets block in librdkafka up to
 * their timeout, serving interrupts every two to four seconds between
 * the slices they make their requests in (a timeout of two seconds or
 * less is one slice).
 *
 * Never create a consumer in the postmaster: librdkafka threads do not
 * survive fork().
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_KAFKA_CONSUMER_H
#define STREAMWIN_KAFKA_CONSUMER_H

#include "datatype/timestamp.h"

/*
 * SQLSTATE of the "offset out of range" error raised by kafka_fetch(): the
 * broker no longer has (or never had) the offset the query must resume
 * from, typically because retention deleted messages the query had not read
 * yet.  It has its own code so that callers and tests can tell it apart from
 * transient failures: retrying cannot fix it, only streamwin.reset_query().
 */
#define ERRCODE_KAFKA_OFFSET_OUT_OF_RANGE	MAKE_SQLSTATE('S','W','K','0','1')

/* Logical start offsets accepted by kafka_assign(). */
#define KAFKA_OFFSET_EARLIEST	(-2)	/* the partition's first offset */
#define KAFKA_OFFSET_LATEST		(-1)	/* the partition's end offset */

/*
 * Partition numbers index an array of per-partition state; refuse absurd
 * ones rather than allocate for them.
 */
#define KAFKA_MAX_PARTITION		1000000

typedef struct KafkaConsumer KafkaConsumer;

/*
 * One message of a batch.  payload is NULL for a message with a null value
 * (a tombstone) and key is NULL for a message without a key; neither is
 * NUL-terminated.  timestamp is the message timestamp (create time or log
 * append time, whichever the topic records), unless has_timestamp is false:
 * the message has none.
 */
typedef struct KafkaMessage
{
	int32		partition;
	int64		offset;
	const char *payload;
	size_t		len;
	const char *key;
	size_t		keylen;
	bool		has_timestamp;
	TimestampTz timestamp;

	/*
	 * The message's headers: the librdkafka message while it is alive
	 * (rkmessage), or for copies that outlive it already as JSON text
	 * (headers_json) or as the reason they are not text (headers_error); all
	 * NULL for a table source's rows.
	 */
	const void *rkmessage;
	const char *headers_json;
	const char *headers_error;
} KafkaMessage;

/*
 * kafka_message_headers_json
 *		A message's headers as the text of a JSON object {"name": "value"}
 *		(a header without a value is null; of repeated names the last one
 *		counts), "{}" without headers.  NULL, with *error set, if a name or
 *		value is not valid text in the database encoding.
 */
extern char *kafka_message_headers_json(const KafkaMessage *m, const char **error);

/*
 * kafka_validate_properties
 *		Check user-supplied librdkafka properties without connecting.
 *
 * For creating a source: raises the same errors kafka_consumer_open() would
 * for these properties (unknown property, invalid value, property reserved
 * by streamwin), and additionally requires the privileges of
 * pg_read_server_files for properties that make the server read a file
 * (ssl.*.location, sasl.kerberos.keytab).  Must run inside a transaction.
 */
extern void kafka_validate_properties(int nprops, const char **keys,
									  const char **values);

/*
 * kafka_consumer_open
 *		Create a consumer for "topic" on the cluster reached through
 *		"brokers" (a bootstrap list host:port[,host:port...]).
 *
 * keys[i]/values[i] (i < nprops) are librdkafka consumer properties passed
 * through from the source's options, applied after streamwin's own
 * defaults.  Raises ERRCODE_INVALID_PARAMETER_VALUE, naming the property,
 * if librdkafka rejects one, and also refuses the properties the
 * exactly-once design depends on (enable.auto.commit,
 * enable.auto.offset.store, auto.offset.reset, enable.partition.eof, the
 * bootstrap list) and those that would load code or run commands in the
 * server.  group.id may be set, e.g. to a group the cluster's ACLs allow:
 * the group is never joined and no offset is ever committed to it, but
 * librdkafka 2.0 refuses assign() without one (default "streamwin").
 *
 * Defaults that differ from librdkafka's, and may be overridden:
 * fetch.wait.max.ms=fetch_wait_ms (how long a broker holds a fetch for a
 * caught-up partition: bounds how long the first fetch after kafka_assign()
 * waits to learn that partitions are at their end, how long other requests
 * on the connection queue behind a held fetch, and on a broker that holds
 * fetches even when data arrives, such as the test broker, how late data
 * is delivered), queued.min.messages=prefetch_messages (at least 100,000:
 * librdkafka goes on fetching until its queue holds that many messages),
 * reconnect.backoff.max.ms=1000 (quick recovery after a broker outage),
 * client.id=streamwin.
 *
 * No network round trip happens here; connection problems show up in the
 * first call that needs the cluster.  Nothing is assigned yet.
 */
#define KAFKA_DEFAULT_FETCH_WAIT_MS 100
extern KafkaConsumer *kafka_consumer_open(const char *brokers,
										  const char *topic, int fetch_wait_ms,
										  int prefetch_messages, int nprops,
										  const char **keys,
										  const char **values);

/*
 * kafka_partition_count
 *		Number of partitions of the topic, from fresh cluster metadata.
 *
 * Raises an error (with the broker's error text as detail) if the metadata
 * cannot be had within timeout_ms or the topic does not exist.  Note that
 * librdkafka's mock cluster creates unknown topics (with 4 partitions) on a
 * metadata request, so with the test broker the topic always exists.
 */
extern int	kafka_partition_count(KafkaConsumer *c, int timeout_ms);

/*
 * kafka_try_partition_count
 *		The same, or -1 if the cluster does not answer in time: for a check
 *		that the next one may make.
 */
extern int	kafka_try_partition_count(KafkaConsumer *c, int timeout_ms);

/*
 * kafka_assign
 *		Read exactly "partitions" from now on, each from offsets[i].
 *
 * offsets[i] is the offset of the next message to deliver (the offset the
 * caller stored after its last committed batch), or KAFKA_OFFSET_EARLIEST /
 * KAFKA_OFFSET_LATEST.  For exactly-once, resolve those two to absolute
 * offsets (kafka_query_watermarks) and store them before the first batch,
 * or a restart would resolve them again to something else.
 *
 * Replaces the whole previous assignment and discards everything fetched
 * for it, including the current batch and anything prefetched.  Assigning
 * the same partitions at the offsets of the last committed batch is how a
 * caller rewinds after a failed batch: the next fetch re-delivers from
 * there.  An empty assignment (n = 0) stops all fetching.  Also clears the
 * per-partition end-of-partition state and any pending error.
 */
extern void kafka_assign(KafkaConsumer *c, int n, const int32 *partitions,
						 const int64 *offsets);

/*
 * kafka_fetch
 *		Take the next batch of messages from the assigned partitions.
 *
 * Waits up to timeout_ms for the first message, then takes whatever else is
 * already available locally, up to max_records in total.  Returns early,
 * possibly with 0 messages, once every assigned partition has reached its
 * end (see kafka_partition_at_eof), so right after kafka_assign() the call
 * waits for data or for the end-of-partition events of empty partitions,
 * but not for the whole timeout.  Returns 0 at once if nothing is assigned.
 *
 * Messages come in offset order within a partition; partitions interleave.
 * A message is never delivered twice within one assignment: the consumer
 * drops anything older than what it already delivered for that partition.
 * *msgs points to consumer-owned memory valid until the next kafka_fetch,
 * kafka_assign or kafka_consumer_close.
 *
 * Once something was taken, the call waits up to linger_ms more for the rest
 * of what the brokers hold now (the next fetch responses), unless every
 * partition is at its end: a batch run by hand then holds everything there
 * is rather than one response's worth.  A worker on a trigger passes 0: it
 * takes the rest in its next batch, and lingering would only add latency.
 *
 * Raises an error when the batch cannot be trusted or cannot make progress:
 * an assigned offset is out of range (ERRCODE_KAFKA_OFFSET_OUT_OF_RANGE),
 * the topic or an assigned partition does not exist, access is denied, or
 * nothing was received while every broker is unreachable (checked with a
 * metadata request of up to 2 seconds after the wait).  Problems librdkafka
 * recovers from by itself (a lost connection, a leader change) do not fail
 * the fetch; they are kept for kafka_last_error().  After an error, rewind
 * with kafka_assign() before fetching again.
 */
extern int	kafka_fetch(KafkaConsumer *c, int max_records, int timeout_ms,
						int linger_ms, KafkaMessage **msgs);

/*
 * kafka_limit_next_fetch
 *		For the next kafka_fetch() only: take at most limits[i] messages of
 *		partitions[i] (assigned ones).  Messages of a partition beyond its
 *		limit are kept by the consumer, in order, and delivered first by the
 *		fetches after; kafka_assign() lets them go.  So a caller can cut
 *		each batch across partitions as it likes, whatever order the
 *		brokers' responses come in.  That fetch waits (up to its timeout,
 *		not just its linger) until each limited partition gave its share or
 *		reached its end, or until 256 MB of messages (counted with their
 *		overhead) are held back.
 */
extern void kafka_limit_next_fetch(KafkaConsumer *c, int n, const int32 *partitions,
								   const int *limits);

/*
 * kafka_partition_at_eof
 *		True if the consumer has reached the end of the partition and
 *		nothing newer has been seen since.
 *
 * That is: since the last kafka_assign(), librdkafka reported the end of
 * the partition, no message of it was delivered after that report, and the
 * high watermark librdkafka last saw is not beyond what was delivered.
 * False for partitions that are not assigned.  No network round trip, so it
 * reflects the last contact with the broker: during an outage it keeps its
 * value (librdkafka does not report the end again after reconnecting).
 */
extern bool kafka_partition_at_eof(KafkaConsumer *c, int32 partition);

/*
 * kafka_partition_eof_offset
 *		Where the consumer stood when librdkafka last reported the end of
 *		the partition, if no message of it came since; else -1.
 *
 * Past the last message delivered where the partition ends in offsets that
 * hold no message for a consumer: a transaction's commit or abort marker,
 * the messages of an aborted transaction.  Unlike kafka_partition_at_eof,
 * not compared with the high watermark: a consumer reading committed
 * messages ends at the last stable offset, before an open transaction's
 * messages, which the high watermark counts.  Every offset before it was
 * delivered or holds no message, whatever came since.
 */
extern int64 kafka_partition_eof_offset(KafkaConsumer *c, int32 partition);

/*
 * kafka_cached_high_watermark
 *		The partition's high watermark (offset after the last message) as
 *		librdkafka last learned it from a fetch (before any: as the broker
 *		answered kafka_query_watermarks, kafka_query_ends or
 *		kafka_learn_ends), or -1 if unknown.
 *
 * No network round trip; useful to compute lag after each batch.
 */
extern int64 kafka_cached_high_watermark(KafkaConsumer *c, int32 partition);

/*
 * kafka_learn_ends
 *		The end offsets of n assigned partitions, as the broker answered
 *		kafka_query_ends before they were assigned (a request then does not
 *		queue behind fetches): kafka_cached_high_watermark gives them until a
 *		fetch brings newer ones, and a partition assigned at its end is at
 *		its end at once, without waiting for a fetch to say so.
 */
extern void kafka_learn_ends(KafkaConsumer *c, int n, const int32 *partitions,
							 const int64 *ends);

/*
 * kafka_query_watermarks
 *		Ask the partition's leader for its low and high watermarks (first
 *		offset still held, offset after the last message).
 *
 * One network round trip; raises an error if the answer does not come
 * within timeout_ms or the partition does not exist.  While the consumer
 * has a fetch outstanding on the same broker connection, the answer queues
 * behind it (up to fetch.wait.max.ms), so use kafka_cached_high_watermark()
 * for per-batch lag and keep this for resolving start offsets.
 */
extern void kafka_query_watermarks(KafkaConsumer *c, int32 partition,
								   int64 *low, int64 *high, int timeout_ms);

/*
 * kafka_query_ends
 *		The end offset (offset after the last message; for read_committed,
 *		the last stable offset) of each of n partitions, into ends[]: one
 *		request per broker leading any of them, where kafka_query_watermarks
 *		asks per partition.  Errors, timeout and queueing as there.
 */
extern void kafka_query_ends(KafkaConsumer *c, int n, const int32 *partitions, int64 *ends,
							 int timeout_ms);

/* As kafka_query_ends, but false (and ends[] all -1) rather than an error. */
extern bool kafka_try_query_ends(KafkaConsumer *c, int n, const int32 *partitions,
								 int64 *ends, int timeout_ms);

/*
 * kafka_wakeup_fd
 *		A file descriptor that becomes readable when messages or events are
 *		queued for this consumer.
 *
 * For WaitLatchOrSocket(..., WL_SOCKET_READABLE, ...) between batches, so a
 * worker with a long trigger interval (or '0') can wake up as soon as data
 * arrives.  It is the read end of a non-blocking pipe that librdkafka
 * writes to when the consumer's queues go from empty to non-empty; call
 * kafka_drain_wakeup() before deciding to wait, then kafka_fetch() after
 * waking.
 */
extern int	kafka_wakeup_fd(KafkaConsumer *c);

/*
 * kafka_drain_wakeup
 *		Empty the wake-up pipe without blocking.
 */
extern void kafka_drain_wakeup(KafkaConsumer *c);

/*
 * kafka_last_error
 *		Text of the last error librdkafka reported (e.g. a broker connection
 *		failure), or NULL if none was reported since the last kafka_fetch()
 *		started.
 *
 * The string belongs to the consumer and is overwritten by later calls.
 */
extern const char *kafka_last_error(KafkaConsumer *c);

/*
 * kafka_consumer_close
 *		Release the consumer and everything it owns (messages included).
 *
 * Never raises an error; safe to call after an error in any other call.
 * May block briefly while librdkafka stops its threads.
 */
extern void kafka_consumer_close(KafkaConsumer *c);

#endif							/* STREAMWIN_KAFKA_CONSUMER_H */
