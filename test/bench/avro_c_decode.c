/*-------------------------------------------------------------------------
 *
 * avro_c_decode.c
 *	  What decoding through avro-c's generic values costs, for
 *	  test/bench/avro_bench.sh: the alternative to streamwin's own decoder.
 *
 * Reads the writer schema and the Avro bodies that gen_avro_events.pl
 * wrote, then decodes every body the way a decoder built on avro-c would:
 * avro_value_read() into one generic value made once for the schema (the
 * cheapest use of the API: no value per message), and every field read out
 * of it as a C value (the long, the strings' pointers, the double).  It
 * makes no PostgreSQL Datums, so it is a lower bound of such a decoder's
 * cost.  Prints one line:
 *
 *	  events=N cpu_s=C ns_per_event=X checksum=S
 *
 * Usage: avro_c_decode SCHEMA_FILE BODIES_FILE [ROUNDS]
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <avro.h>

static char *
slurp(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf;

	if (f == NULL)
	{
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	*len = (size_t) ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(*len + 1);
	if (buf == NULL || fread(buf, 1, *len, f) != *len)
	{
		fprintf(stderr, "could not read %s\n", path);
		exit(1);
	}
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static double
cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int
main(int argc, char **argv)
{
	size_t		schema_len;
	size_t		bodies_len;
	char	   *schema_json;
	char	   *bodies;
	int			rounds = argc > 3 ? atoi(argv[3]) : 1;
	avro_schema_t schema;
	avro_value_iface_t *iface;
	avro_value_t value;
	avro_reader_t reader;
	long		events = 0;
	uint64_t	checksum = 0;
	double		start;
	double		cpu;

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s SCHEMA_FILE BODIES_FILE [ROUNDS]\n", argv[0]);
		return 2;
	}
	schema_json = slurp(argv[1], &schema_len);
	bodies = slurp(argv[2], &bodies_len);
	if (avro_schema_from_json_length(schema_json, schema_len, &schema) != 0)
	{
		fprintf(stderr, "schema: %s\n", avro_strerror());
		return 1;
	}
	iface = avro_generic_class_from_schema(schema);
	avro_generic_value_new(iface, &value);

	start = cpu_seconds();
	for (int r = 0; r < rounds; r++)
	{
		size_t		pos = 0;

		while (pos + 4 <= bodies_len)
		{
			uint32_t	len = ((uint32_t) (unsigned char) bodies[pos] << 24) |
				((uint32_t) (unsigned char) bodies[pos + 1] << 16) |
				((uint32_t) (unsigned char) bodies[pos + 2] << 8) |
				(unsigned char) bodies[pos + 3];
			avro_value_t field;
			int64_t		l;
			double		d;
			const char *s;
			size_t		slen;

			reader = avro_reader_memory(bodies + pos + 4, len);
			if (avro_value_read(reader, &value) != 0)
			{
				fprintf(stderr, "decode: %s\n", avro_strerror());
				return 1;
			}
			avro_reader_free(reader);
			avro_value_get_by_index(&value, 0, &field, NULL);
			avro_value_get_long(&field, &l);
			checksum += (uint64_t) l;
			avro_value_get_by_index(&value, 1, &field, NULL);
			avro_value_get_string(&field, &s, &slen);
			checksum += slen;
			avro_value_get_by_index(&value, 2, &field, NULL);
			avro_value_get_string(&field, &s, &slen);
			checksum += (unsigned char) s[0];
			avro_value_get_by_index(&value, 3, &field, NULL);
			avro_value_get_double(&field, &d);
			checksum += (uint64_t) (d * 100);
			avro_value_get_by_index(&value, 4, &field, NULL);
			avro_value_get_long(&field, &l);
			checksum += (uint64_t) l;
			pos += 4 + len;
			events++;
		}
	}
	cpu = cpu_seconds() - start;
	printf("events=%ld cpu_s=%.3f ns_per_event=%.0f checksum=%llu\n",
		   events, cpu, cpu * 1e9 / events, (unsigned long long) checksum);
	avro_value_decref(&value);
	avro_value_iface_decref(iface);
	avro_schema_decref(schema);
	return 0;
}
