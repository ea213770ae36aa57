/*-------------------------------------------------------------------------
 *
 * kafka_sasl.h
 *	  Cyrus SASL's process-wide start, without its plugins unless a consumer
 *	  needs them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_KAFKA_SASL_H
#define STREAMWIN_KAFKA_SASL_H

#include <librdkafka/rdkafka.h>

/*
 * kafka_sasl_prepare
 *		Called on the backend's thread before each rd_kafka_new with its
 *		configuration: the process's first consumer starts Cyrus SASL
 *		without plugins unless it uses SASL; a SASL consumer after such
 *		a start restarts Cyrus with them.
 */
extern void kafka_sasl_prepare(rd_kafka_conf_t *conf);

#endif							/* STREAMWIN_KAFKA_SASL_H */
