#!/usr/bin/perl
# gen_changelog.pl: the rows and changes of the changelog case of streamwin's
# benchmark (test/bench/run_bench.sh, case CL: a changelog table source
# against a per-row trigger and a periodic recompute, issue 35).
#
#   gen_changelog.pl --rows N --changes C --regions R --out DIR
#
# Writes:
#   DIR/load.csv      N rows of orders (id,region,amount,customer,status,
#                     created_at), ids 1..N in order: the load (inserts)
#   DIR/changes.csv   C changes (seq,op,id,region,amount,customer,status,
#                     created_at), seq 1..C in the order they are applied:
#                     op 'u' (50%): the row id gets a new region and/or
#                       amount (half of the updates change the amount only,
#                       a quarter the region only, a quarter both; the
#                       other columns are empty: only region and amount
#                       are set);
#                     op 'd' (20%): the row id is deleted (other columns
#                       empty);
#                     op 'i' (30%): a new row, ids N+1, N+2, ... in order.
#                     Updates and deletes pick a row alive at that point of
#                     the sequence, uniformly, so a transaction (the
#                     harness applies them in order, a fixed number per
#                     transaction) may touch a row it inserted, or touch a
#                     row twice.
#   DIR/expected.env  what the table holds once every change is applied, as
#                     shell variables (the harness checks each table
#                     against them before it compares the summaries)
#
# region is uniform over 0..R-1; amount has two decimals, 0.01 to 1000.00,
# so the expected sum is computed exactly in cents.  Deterministic: the same
# arguments give the same files (Perl's own drand48, seeded).
use strict;
use warnings;
use Getopt::Long;

my ($rows, $changes, $regions, $out) = (1_000_000, 1_000_000, 1000, undef);
GetOptions(
	'rows=i'    => \$rows,
	'changes=i' => \$changes,
	'regions=i' => \$regions,
	'out=s'     => \$out) or die "usage: $0 --rows N --changes C --regions R --out DIR\n";
die "--out is required\n" unless defined $out;
die "--rows and --regions must be positive\n" if $rows < 1 || $regions < 1;

srand(35);
my $T0 = 1_767_225_600;    # 2026-01-01 00:00:00 UTC
my @status = qw(new paid shipped);
my (@region, @cents);      # by id: the live rows' values (undef once deleted)
my @live;                  # the live ids, in no particular order
my @pos;                   # by id: its index in @live

sub amount { my ($c) = @_; return sprintf('%d.%02d', int($c / 100), $c % 100) }
sub new_cents { return 1 + int(rand(100_000)) }

sub insert_row
{
	my ($fh, $prefix, $id) = @_;
	my $r = int(rand($regions));
	my $c = new_cents();
	$region[$id] = $r;
	$cents[$id]  = $c;
	$pos[$id]    = scalar @live;
	push @live, $id;
	my $t = $T0 + $id;
	my ($s, $mi, $h, $d, $mo, $y) = gmtime($t);
	printf $fh "%s%d,%d,%s,%d,%s,%04d-%02d-%02d %02d:%02d:%02d+00\n", $prefix, $id, $r, amount($c),
	  1 + ($id * 7919) % 100_000, $status[ $id % 3 ], $y + 1900, $mo + 1, $d, $h, $mi, $s;
}

open my $load, '>', "$out/load.csv" or die "$out/load.csv: $!";
insert_row($load, '', $_) for 1 .. $rows;
close $load or die "$out/load.csv: $!";

my ($n_upd, $n_del, $n_ins, $next_id) = (0, 0, 0, $rows + 1);
open my $ch, '>', "$out/changes.csv" or die "$out/changes.csv: $!";
for my $seq (1 .. $changes)
{
	my $x = rand();
	if ($x < 0.3 || !@live)
	{
		insert_row($ch, "$seq,i,", $next_id++);
		$n_ins++;
		next;
	}
	my $id = $live[ int(rand(scalar @live)) ];
	if ($x < 0.5)
	{
		# delete: the last live id takes its place in @live
		my $last = pop @live;
		if ($last != $id)
		{
			$live[ $pos[$id] ] = $last;
			$pos[$last] = $pos[$id];
		}
		undef $region[$id];
		undef $cents[$id];
		print $ch "$seq,d,$id,,,,,\n";
		$n_del++;
		next;
	}
	my $kind = rand();
	if ($kind < 0.75)
	{
		# the amount (half of the updates; the other half of this branch
		# changes the region too)
		my $c;
		do { $c = new_cents() } while ($c == $cents[$id]);
		$cents[$id] = $c;
	}
	if ($kind >= 0.5)
	{
		my $r;
		do { $r = int(rand($regions)) } while ($regions > 1 && $r == $region[$id]);
		$region[$id] = $r;
	}
	printf $ch "%d,u,%d,%d,%s,,,\n", $seq, $id, $region[$id], amount($cents[$id]);
	$n_upd++;
}
close $ch or die "$out/changes.csv: $!";

my ($sum, %groups) = (0);
for my $id (@live)
{
	$sum += $cents[$id];
	$groups{ $region[$id] } = 1;
}
open my $env, '>', "$out/expected.env" or die "$out/expected.env: $!";
printf $env "CL_ROWS=%d\n",          $rows;
printf $env "CL_CHANGES=%d\n",       $changes;
printf $env "CL_UPDATES=%d\n",       $n_upd;
printf $env "CL_DELETES=%d\n",       $n_del;
printf $env "CL_INSERTS=%d\n",       $n_ins;
printf $env "CL_FINAL_ROWS=%d\n",    scalar @live;
printf $env "CL_FINAL_SUM=%s\n",     amount($sum);
printf $env "CL_FINAL_GROUPS=%d\n",  scalar keys %groups;
printf $env "CL_LOAD_SUM=%s\n",      amount(load_sum());
close $env;

# the load's sum, from load.csv (its rows' values are gone from the arrays)
sub load_sum
{
	my $s = 0;
	open my $fh, '<', "$out/load.csv" or die "$out/load.csv: $!";
	while (<$fh>)
	{
		my (undef, undef, $a) = split /,/;
		my ($e, $f) = split /\./, $a;
		$s += $e * 100 + $f;
	}
	close $fh;
	return $s;
}
