/*-------------------------------------------------------------------------
 *
 * schema_registry.h
 *	  A client of a Confluent-compatible schema registry (schema_registry.c).
 *
 * Runs in a backend or a query worker, inside a transaction, never in
 * librdkafka's threads.  A call blocks for at most
 * streamwin.schema_registry_timeout, and a query cancel or a shutdown
 * interrupts it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_SCHEMA_REGISTRY_H
#define STREAMWIN_SCHEMA_REGISTRY_H

/* streamwin.schema_registry_timeout: ms a registry request may take */
extern int	streamwin_schema_registry_timeout_ms;

/*
 * schema_registry_fetch
 *		The writer schema of id from the registry at url (GET
 *		{url}/schemas/ids/{id}), with HTTP basic authentication when user is
 *		not NULL, palloc'd; NULL, with *reason saying why, when the registry
 *		answers that it has no such id (HTTP 404 with error code 40403) or
 *		gives a schema that refers to other subjects' schemas, which
 *		streamwin does not read (its messages are then dead letters).
 *		Raises an error (the batch fails, and is retried) when the registry
 *		cannot be reached, times out, or answers anything else.
 */
extern char *schema_registry_fetch(const char *url, const char *user, const char *password,
								   int32 id, char **reason);

/* libcurl's global set-up: from _PG_init, before any thread starts. */
extern void schema_registry_init(void);

/* At a source's creation: an error unless url is an http or https URL. */
extern void schema_registry_check_url(const char *url);

#endif							/* STREAMWIN_SCHEMA_REGISTRY_H */
