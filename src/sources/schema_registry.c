/*-------------------------------------------------------------------------
 *
 * schema_registry.c
 *	  Fetching Avro writer schemas by id from a schema registry over HTTP
 *	  (libcurl): GET {url}/schemas/ids/{id} answers {"schema": "..."}.
 *
 * The registry is asked only for an id that neither the worker's decoder
 * nor streamwin.avro_schemas knows (avro_input.c), at most once per id per
 * batch: never per message.  Every request is bounded (a connect timeout
 * and a total timeout, streamwin.schema_registry_timeout), and a query
 * cancel or a shutdown aborts it through libcurl's progress callback.  Any
 * answer but the schema or a 404 is the registry failing, which fails the
 * batch: its messages are neither skipped nor dead-lettered, and the
 * worker retries the batch with its backoff.
 *
 * libcurl allocates with malloc and the response is collected in a malloc'd
 * buffer, so that nothing in a callback can raise a PostgreSQL error (a
 * longjmp through libcurl would leave its handle half-done).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <curl/curl.h>

#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "jsonb_util.h"
#include "schema_registry.h"

int			streamwin_schema_registry_timeout_ms = 10000;

/* curl_global_init succeeded (schema_registry_init) */
static bool curl_ready = false;

/* A registry's answer larger than this is refused (schemas are small) */
#define REGISTRY_MAX_RESPONSE	(16 * 1024 * 1024)

typedef struct Response
{
	char	   *data;			/* malloc'd */
	size_t		len;
	bool		too_large;
} Response;

static size_t
collect(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Response   *r = arg;
	size_t		n = size * nmemb;
	char	   *grown;

	if (r->len + n > REGISTRY_MAX_RESPONSE)
	{
		r->too_large = true;
		return 0;
	}
	grown = realloc(r->data, r->len + n + 1);
	if (grown == NULL)
		return 0;
	r->data = grown;
	memcpy(r->data + r->len, ptr, n);
	r->len += n;
	r->data[r->len] = '\0';
	return n;
}

/*
 * Abort the transfer when the backend is asked to cancel or to exit (not
 * for the other interrupts, which CHECK_FOR_INTERRUPTS serves and which
 * must not fail a batch).
 */
static int
interrupted(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	/* a worker's SIGTERM (a server shutdown, pg_terminate_backend) sets it */
	return QueryCancelPending || ProcDiePending || ShutdownRequestPending ? 1 : 0;
}

/*
 * schema_registry_init
 *		libcurl's global set-up, which is not thread-safe: done when the
 *		library is loaded (_PG_init), in the postmaster when preloaded, in
 *		any case before librdkafka starts a thread in the process.
 */
void
schema_registry_init(void)
{
	curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == 0;
}

/*
 * url without the user and password it may hold (http://user:pw@host/):
 * errors go to the query's last_error and the server log
 */
static char *
url_without_login(const char *url)
{
	const char *host = strstr(url, "://");
	const char *end;
	const char *at = NULL;

	if (host == NULL)
		return pstrdup(url);
	host += 3;
	/* the authority ends at the path, query or fragment; its login at its last @ */
	end = host + strcspn(host, "/?#");
	for (const char *p = host; p < end; p++)
		if (*p == '@')
			at = p;
	if (at == NULL)
		return pstrdup(url);
	return psprintf("%.*s%s", (int) (host - url), url, at + 1);
}

void
schema_registry_check_url(const char *url)
{
	if (pg_strncasecmp(url, "http://", 7) != 0 && pg_strncasecmp(url, "https://", 8) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"schema_registry\": \"%s\"", url_without_login(url)),
				 errdetail("The schema registry is reached over HTTP."),
				 errhint("Give an http or https URL, for example \"http://registry:8081\".")));
}

static void
registry_failed(const char *url, int32 id, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not fetch Avro schema %d from the schema registry at \"%s\"", id,
					url_without_login(url)),
			 errdetail("%s", detail),
			 errhint("The batch is retried until the registry answers; no message is skipped.")));
}

/* A registry's answer as a JSON object, or NULL */
static Jsonb *
answer_json(const char *body)
{
	Jsonb	   *volatile jb = NULL;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(body)));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
	}
	PG_END_TRY();
	return jb != NULL && JB_ROOT_IS_OBJECT(jb) ? jb : NULL;
}

/*
 * What an error may quote of an answer: a registry's own error message
 * ({"error_code": ..., "message": ...}), and nothing of anything else.  The
 * URL is a role's to choose, and an answer it points at may hold what the
 * role may not read (another service on the server's network, a cloud's
 * metadata): its length alone.
 */
static char *
answer_quoted(const char *body)
{
	Jsonb	   *jb = answer_json(body);
	char	   *message = jb != NULL && jsonb_get_text(jb, "error_code") != NULL ?
		jsonb_get_text(jb, "message") : NULL;

	if (message != NULL)
		return psprintf("the registry's error \"%.200s\"", message);
	return psprintf("%zu bytes that are not the registry's error", strlen(body));
}

/*
 * The schema in a registry's 200 answer (body), or an error.  A schema
 * that refers to types of other subjects' schemas ("references", for
 * Protobuf's and JSON Schema's imports and Avro's shared types) cannot be
 * read without them: NULL, and *reason says so.
 */
static char *
schema_of_answer(const char *url, int32 id, const char *body, char **reason)
{
	Jsonb	   *jb = answer_json(body);
	char	   *schema = jb != NULL ? jsonb_get_text(jb, "schema") : NULL;
	JsonbValue *refs = jb != NULL ? option_value(jb, "references") : NULL;

	if (schema == NULL)
		registry_failed(url, id, psprintf("The registry's answer is not a JSON object with a \"schema\": %s",
										  answer_quoted(body)));
	if (refs != NULL && !(refs->type == jbvBinary && JsonContainerIsArray(refs->val.binary.data) &&
						  JsonContainerSize(refs->val.binary.data) == 0))
	{
		*reason = psprintf("Avro writer schema %d refers to types of other subjects' schemas (schema references), which streamwin does not read",
						   id);
		return NULL;
	}
	return schema;
}

char *
schema_registry_fetch(const char *url, const char *user, const char *password, int32 id,
					  char **reason)
{
	CURL	   *curl;
	CURLcode	rc;
	long		status = 0;
	char		errbuf[CURL_ERROR_SIZE];
	Response	response = {NULL, 0, false};
	struct curl_slist *headers = NULL;
	int			len = strlen(url);
	char	   *request;
	char	   *body;

	if (!curl_ready)
		elog(ERROR, "libcurl could not be initialized when streamwin was loaded");
	while (len > 0 && url[len - 1] == '/')
		len--;
	request = psprintf("%.*s/schemas/ids/%d", len, url, id);

	curl = curl_easy_init();
	if (curl == NULL)
		elog(ERROR, "could not create a libcurl handle");
	errbuf[0] = '\0';
	headers = curl_slist_append(headers, "Accept: application/vnd.schemaregistry.v1+json, application/json");
	curl_easy_setopt(curl, CURLOPT_URL, request);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
					 (long) Min(streamwin_schema_registry_timeout_ms, 5000));
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long) streamwin_schema_registry_timeout_ms);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, interrupted);
	if (user != NULL)
	{
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME, user);
		curl_easy_setopt(curl, CURLOPT_PASSWORD, password != NULL ? password : "");
	}
	rc = curl_easy_perform(curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(curl);
	curl_slist_free_all(headers);

	body = pstrdup(response.data != NULL ? response.data : "");
	free(response.data);
	CHECK_FOR_INTERRUPTS();
	if (rc == CURLE_ABORTED_BY_CALLBACK && ShutdownRequestPending)
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("the request for Avro schema %d was stopped: the worker is shutting down", id)));
	if (rc != CURLE_OK)
		registry_failed(url, id, response.too_large ?
						psprintf("The answer is larger than %d bytes.", REGISTRY_MAX_RESPONSE) :
						psprintf("%s.", errbuf[0] ? errbuf : curl_easy_strerror(rc)));
	/*
	 * Only the registry's own "schema not found" (error code 40403) says
	 * the id does not exist; any other 404 is more likely a wrong URL,
	 * which must not turn every message into a dead letter.
	 */
	if (status == 404)
	{
		Jsonb	   *jb = answer_json(body);
		char	   *code = jb != NULL ? jsonb_get_text(jb, "error_code") : NULL;

		if (code != NULL && strcmp(code, "40403") == 0)
		{
			*reason = psprintf("Avro writer schema %d is not in the schema registry", id);
			return NULL;
		}
		registry_failed(url, id, psprintf("The registry answered HTTP 404 without its error code 40403 (schema not found): %s",
										  answer_quoted(body)));
	}
	if (status != 200)
		registry_failed(url, id, psprintf("The registry answered HTTP %ld: %s", status, answer_quoted(body)));
	return schema_of_answer(url, id, body, reason);
}
