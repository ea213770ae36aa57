/*-------------------------------------------------------------------------
 *
 * jsonb_util.c
 *	  Reading options given as a jsonb object: a key's text or value, and
 *	  refusing unknown keys (see jsonb_util.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "jsonb_util.h"

/*
 * jsonb_get_text
 *		The text of a top-level key of a jsonb object (strings unquoted), or
 *		NULL when absent or JSON null.
 */
char *
jsonb_get_text(Jsonb *jb, const char *key)
{
	JsonbValue	k;
	JsonbValue *v;

	if (jb == NULL || !JB_ROOT_IS_OBJECT(jb))
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	v = findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &k);
	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out,
												   NumericGetDatum(v->val.numeric)));
	if (v->type == jbvBool)
		return pstrdup(v->val.boolean ? "true" : "false");
	/* a container: its JSON text */
	return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
}


/* The value of option name, or NULL if absent or JSON null. */
JsonbValue *
option_value(Jsonb *options, const char *name)
{
	JsonbValue	k;
	JsonbValue *v;

	k.type = jbvString;
	k.val.string.val = (char *) name;
	k.val.string.len = strlen(name);
	v = findJsonbValueFromContainer(&options->root, JB_FOBJECT, &k);
	return v != NULL && v->type != jbvNull ? v : NULL;
}

/*
 * jsonb_check_keys
 *		Options are a JSON object whose top-level keys must be among `valid`
 *		(NULL-terminated): unknown keys are refused, so that a typo is not
 *		silently ignored.  `what` names them in messages ("source", "query").
 */
void
jsonb_check_keys(Jsonb *options, const char *const *valid, const char *what)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;
	StringInfoData list;

	if (!JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s options must be a JSON object", what)));
	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
			depth++;
		else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
			depth--;
		else if (tok == WJB_KEY && depth == 1)
		{
			char	   *key = pnstrdup(v.val.string.val, v.val.string.len);
			bool		known = false;

			for (const char *const *k = valid; *k != NULL; k++)
				known = known || strcmp(*k, key) == 0;
			if (known)
				continue;
			initStringInfo(&list);
			for (const char *const *k = valid; *k != NULL; k++)
				appendStringInfo(&list, "%s%s", k == valid ? "" : k[1] ? ", " : " and ", *k);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown %s option \"%s\"", what, key),
					 errhint("Valid options are %s.", list.data)));
		}
	}
}
