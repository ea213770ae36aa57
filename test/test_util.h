/*
 * test_util.h
 *	  What the standalone test programs (kafka_broker, kafka_produce,
 *	  bench/raw_consume) share: fatal errors, checked integer arguments and
 *	  librdkafka properties.
 *
 * Header-only, for programs built from one file each.  Define PROGNAME (the
 * program's name, prefixed to its messages) before including it.
 */
#ifndef STREAMWIN_TEST_UTIL_H
#define STREAMWIN_TEST_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <librdkafka/rdkafka.h>

#ifndef PROGNAME
#error "define PROGNAME before including test_util.h"
#endif

/* Print "PROGNAME: message" on stderr and exit 1. */
static void
			die(const char *fmt,...)
			__attribute__((format(printf, 1, 2), noreturn));

static void
die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: ", PROGNAME);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* An integer argument in [min, max], or die naming it. */
static long long
parse_int(const char *s, const char *what, long long min, long long max)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		die("invalid %s: \"%s\"", what, s);
	return v;
}

/* Set a librdkafka property, or die with librdkafka's reason. */
static void
set_conf(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char		errstr[512];

	if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) !=
		RD_KAFKA_CONF_OK)
		die("invalid property %s=%s: %s", name, value, errstr);
}

#endif
