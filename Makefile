# streamwin: PGXS build.  `make demo` and `make test` install what they need
# (Debian packages) first, so they work on a fresh machine.

EXTENSION  = streamwin
MODULE_big = streamwin
# src/ is one folder per layer, each calling only those below it:
# decode, base, functions, store, catalog, sources, operators, batch,
# runtime, compile; streamwin.c (_PG_init) on top.  See docs/development.md.
SRC_DIRS   = decode base functions store catalog sources operators batch runtime compile
OBJS       = $(patsubst %.c,%.o,$(wildcard src/*.c $(addsuffix /*.c,$(addprefix src/,$(SRC_DIRS)))))
DATA       = $(wildcard sql/streamwin--*.sql)

# pg_regress tests: the files in sql/ without "--" in their names, in order.
REGRESS      = catalog sources decoding queries windows batches dedup table_sources results aggregates joins changelog resets security
REGRESS_OPTS = --inputdir=. --temp-config=test/regress.conf \
               --temp-instance=$(or $(TESTDIR),.)/tmp_check_regress

# TAP tests (PostgreSQL::Test::Cluster) live in test/t.
TAP_TESTS  = 1
PROVE_TESTS = test/t/*.pl

RDKAFKA_CFLAGS := $(shell pkg-config --cflags rdkafka 2>/dev/null)
RDKAFKA_LIBS   := $(shell pkg-config --libs rdkafka 2>/dev/null || echo -lrdkafka)
# avro-c checks Avro schemas; libcurl fetches them from a schema registry
AVRO_CFLAGS    := $(shell pkg-config --cflags avro-c libcurl 2>/dev/null)
AVRO_LIBS      := $(shell pkg-config --libs avro-c libcurl 2>/dev/null || echo -lavro -lcurl)

# Each layer's folder is on the include path (not src/ itself: src/catalog/
# would shadow PostgreSQL's catalog/ headers).
# Every symbol hidden but those declared PGDLLEXPORT (src/base/sql_function.h):
# the server loads extensions with RTLD_GLOBAL, where an exported helper
# could bind another library's call of the same name.
PG_CPPFLAGS = $(addprefix -I$(srcdir)/src/,$(SRC_DIRS)) $(RDKAFKA_CFLAGS) $(AVRO_CFLAGS) \
              '-DPGDLLEXPORT=__attribute__((visibility("default")))'
PG_CFLAGS   = -fvisibility=hidden \
              -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror=implicit-function-declaration
SHLIB_LINK  = $(RDKAFKA_LIBS) $(AVRO_LIBS)

EXTRA_CLEAN = test/kafka_broker test/kafka_produce test/bench/raw_consume tmp_check_regress

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
# Without the server development files there is no PGXS yet: say how to get
# them (make deps, demo and test install them, then re-run make).
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else
all:
	@echo "PostgreSQL 15 server development files are missing: run 'make deps' first" >&2; exit 1
endif

# PGXS does not track headers: rebuild every object when any header changes.
$(OBJS): $(wildcard src/*/*.h)

# Test helpers: the Kafka test broker (librdkafka's mock cluster), a producer,
# and the benchmark's bare consumer, which tests use to read a topic back.
TEST_PROGRAMS = test/kafka_broker test/kafka_produce test/bench/raw_consume

test/kafka_broker: test/kafka_broker.c test/test_util.h
	$(CC) -O2 -Wall -o $@ $< $(RDKAFKA_CFLAGS) $(RDKAFKA_LIBS)

test/kafka_produce: test/kafka_produce.c test/test_util.h
	$(CC) -O2 -Wall -o $@ $< $(RDKAFKA_CFLAGS) $(RDKAFKA_LIBS)

test-programs: $(TEST_PROGRAMS)

.PHONY: deps demo test test-programs

deps:
	@test/install_deps.sh

demo: deps
	@$(MAKE) --no-print-directory all test-programs
	@test/demo.sh

test: deps
	@$(MAKE) --no-print-directory all test-programs
	@test/run_tests.sh

# Used by test/run_tests.sh to run exactly the pg_regress tests and options
# defined above (REGRESS_OPTS as completed by PGXS).
.PHONY: print-regress
print-regress:
	$(info REGRESS=$(REGRESS))
	$(info REGRESS_OPTS=$(REGRESS_OPTS))
	@:

# The long crash soak of issue 5: the crash-recovery test with 200k events
# and five rounds of (worker SIGKILL, unrelated backend SIGKILL, immediate
# restart).  Not part of `make test`.
.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory all test-programs
	@STREAMWIN_CRASH_EVENTS=200000 STREAMWIN_CRASH_ROUNDS=5 SKIP_REGRESS=1 \
		PROVE_TESTS=test/t/008_crash_recovery.pl TAP_TIMEOUT=1800 test/run_tests.sh

# Benchmarks (test/bench/run_bench.sh; results in test/bench/results.md and
# throughput.png).  Not part of `make test`.  `make bench BENCH_SHORT=1`
# checks that the harness works (fewer events; results go elsewhere), and
# BENCH_ONLY / BENCH_CASES select parts: see the header of run_bench.sh.
test/bench/raw_consume: test/bench/raw_consume.c test/test_util.h
	$(CC) -O2 -Wall -o $@ $< $(RDKAFKA_CFLAGS) $(RDKAFKA_LIBS)

.PHONY: bench
bench:
	@test/bench/install_deps.sh
	@$(MAKE) --no-print-directory all test-programs test/bench/raw_consume
	@PG_CONFIG="$(PG_CONFIG)" test/bench/run_bench.sh
