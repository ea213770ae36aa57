/*-------------------------------------------------------------------------
 *
 * kafka_sasl.c
 *	  Cyrus SASL's process-wide start, without its plugins unless a consumer
 *	  needs them (see kafka_sasl.h).
 *
 * librdkafka starts Cyrus SASL for the whole process when it makes its
 * first client (sasl_client_init), and Cyrus then loads every plugin
 * installed in its plugin directory (eight on Debian, and Berkeley DB for
 * sasldb): 2-5 ms of a new session's first batch, a quarter of a cron
 * job's run_batch over fresh events, and of every worker's start.
 * librdkafka uses Cyrus for GSSAPI (Kerberos) only; PLAIN, SCRAM and
 * OAUTHBEARER are its own code.
 *
 * So before a process's first consumer, unless that consumer uses SASL,
 * Cyrus is started here with a plugin directory that does not exist;
 * librdkafka's own start then only counts one more user.  A later consumer
 * that uses SASL (any mechanism: the choice of Cyrus is librdkafka's)
 * stops Cyrus and starts it again with its plugins, as librdkafka would
 * have.  No Cyrus connection exists at that point: only a SASL consumer
 * opens one, and none has been made.
 *
 * libsasl2 is librdkafka's dependency, not streamwin's: its two functions
 * are looked up in the process; if librdkafka was built without Cyrus
 * they are not there, and nothing happens here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <limits.h>

#include "kafka_sasl.h"

/* Cyrus SASL's API (sasl/sasl.h), declared here: the header is not needed */
#define CYRUS_SASL_OK			0
#define CYRUS_SASL_CONTINUE		1
#define CYRUS_SASL_CB_LIST_END	0
#define CYRUS_SASL_CB_GETPATH	3

typedef struct CyrusCallback
{
	unsigned long id;
	int			(*proc) (void);
	void	   *context;
} CyrusCallback;

typedef int (*cyrus_client_init_fn) (const CyrusCallback *callbacks);
typedef int (*cyrus_client_done_fn) (void);

/* Where Cyrus has been left by this process */
typedef enum CyrusState
{
	CYRUS_UNTOUCHED,			/* not started here: librdkafka does it */
	CYRUS_WITHOUT_PLUGINS,		/* started here, with no plugins */
	CYRUS_WITH_PLUGINS			/* as librdkafka starts it */
} CyrusState;

static CyrusState cyrus_state = CYRUS_UNTOUCHED;

/* Cyrus's plugin path: a directory that does not exist, so none is loaded */
static int
no_plugin_path(void *context, const char **path)
{
	*path = "/nonexistent/streamwin-no-sasl-plugins";
	return CYRUS_SASL_OK;
}

/* Does this configuration authenticate with SASL (security.protocol sasl_*)? */
static bool
conf_uses_sasl(rd_kafka_conf_t *conf)
{
	char		protocol[64];
	size_t		size = sizeof(protocol);

	if (rd_kafka_conf_get(conf, "security.protocol", protocol, &size) != RD_KAFKA_CONF_OK)
		return true;			/* unknown: as librdkafka would */
	return pg_strncasecmp(protocol, "sasl", 4) == 0;
}

void
kafka_sasl_prepare(rd_kafka_conf_t *conf)
{
	cyrus_client_init_fn client_init;
	cyrus_client_done_fn client_done;
	bool		uses_sasl = conf_uses_sasl(conf);

	if (cyrus_state == CYRUS_WITH_PLUGINS ||
		(cyrus_state == CYRUS_WITHOUT_PLUGINS && !uses_sasl))
		return;
	client_init = (cyrus_client_init_fn) dlsym(RTLD_DEFAULT, "sasl_client_init");
	client_done = (cyrus_client_done_fn) dlsym(RTLD_DEFAULT, "sasl_client_done");

	if (cyrus_state == CYRUS_UNTOUCHED)
	{
		static const CyrusCallback callbacks[] = {
			{CYRUS_SASL_CB_GETPATH, (int (*) (void)) (pg_funcptr_t) no_plugin_path, NULL},
			{CYRUS_SASL_CB_LIST_END, NULL, NULL}
		};

		/* without a way to stop it again, Cyrus is left to librdkafka */
		if (uses_sasl || client_init == NULL || client_done == NULL ||
			client_init(callbacks) != CYRUS_SASL_OK)
			cyrus_state = CYRUS_WITH_PLUGINS;
		else
			cyrus_state = CYRUS_WITHOUT_PLUGINS;
		return;
	}

	/*
	 * A SASL consumer after plugin-less ones: each sasl_client_done takes
	 * one user away (this file's start, librdkafka's: one for each time its
	 * count of clients went from none to one, which has no bound in a long
	 * session) until the last stops Cyrus; then a start as librdkafka's,
	 * which loads the plugins.
	 */
	for (int users = 0; users < INT_MAX && client_done() == CYRUS_SASL_CONTINUE; users++)
		;
	if (client_init(NULL) != CYRUS_SASL_OK)
		elog(LOG, "streamwin: could not start Cyrus SASL with its plugins");
	cyrus_state = CYRUS_WITH_PLUGINS;
}
