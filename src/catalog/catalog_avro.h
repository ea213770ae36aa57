/*-------------------------------------------------------------------------
 *
 * catalog_avro.h
 *	  The Avro writer schemas kept per source (catalog_avro.c):
 *	  streamwin.avro_schemas.
 *
 * Functions run inside a transaction; each connects to SPI itself.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWIN_CATALOG_AVRO_H
#define STREAMWIN_CATALOG_AVRO_H

/* The schema of id schema_id kept for source source_id, or NULL. */
extern char *catalog_avro_schema(int32 source_id, int32 schema_id);

/*
 * Keep schema as source source_id's schema schema_id, in the caller's
 * transaction; true if this inserted it, false if it was kept already.
 */
extern bool catalog_avro_store(int32 source_id, int32 schema_id, const char *schema);

#endif							/* STREAMWIN_CATALOG_AVRO_H */
