# 242_no_rewrite_charged.pl: memreq.c alter_builds_index charges
# maintenance_work_mem by the subcommand alone, whatever the AlterTableStmt
# is about (stmt->objtype) or whether the relation has storage.  The parser
# gives an AlterTableStmt to ALTER TYPE (composite), ALTER FOREIGN TABLE and
# to a partitioned table too; none of these rewrites anything or builds an
# index:
#   ALTER TYPE comp ALTER ATTRIBUTE x TYPE bigint    (AT_AlterColumnType)
#   ALTER FOREIGN TABLE ft ALTER COLUMN a TYPE bigint (AT_AlterColumnType)
#   ALTER FOREIGN TABLE ft ADD COLUMN r float8 DEFAULT random()
#   ALTER TABLE parted SET ACCESS METHOD heap  (a partitioned table: only
#     the default of its future partitions, 17 on)
#   ALTER TABLE t ALTER COLUMN v SET EXPRESSION AS (...) of a VIRTUAL
#     generated column (18: nothing stored, no rewrite)
# Each is charged maintenance_work_mem, and so, in a workload whose
# max_memory is in use, waits for memory (up to memory_timeout) that it
# never uses: a catalog-only DDL blocked behind running queries while it
# holds its AccessExclusiveLock... (here: a statement_timeout).
#
# Correct behaviour asserted: each requests 0 bytes (as ADD COLUMN with a
# constant default does), the control ALTER COLUMN TYPE of a table 4 MB;
# and the ALTER TYPE runs at once in a workload whose 3 MB are 2 MB used.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('no_rewrite_charged', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '3MB', '60s');
	CREATE TYPE comp AS (x int, y int);
	CREATE FOREIGN DATA WRAPPER dummy;
	CREATE SERVER dummy_srv FOREIGN DATA WRAPPER dummy;
	CREATE FOREIGN TABLE ft (a int) SERVER dummy_srv;
	CREATE TABLE parted (a int) PARTITION BY RANGE (a);
});
# SET ACCESS METHOD of a partitioned table from 17, SET EXPRESSION from 17,
# virtual generated columns from 18
my $version = $node->safe_psql('postgres', 'SHOW server_version_num');
$node->safe_psql('postgres', $version >= 180000
	? 'CREATE TABLE t (a int, b int, v int GENERATED ALWAYS AS (a * 2) VIRTUAL)'
	: 'CREATE TABLE t (a int, b int)');
$node->safe_psql('postgres', 'INSERT INTO t VALUES (1, 1)');
wait_loaded($node, 'w', 8);

sub requested
{
	my ($stmt) = @_;
	return $node->safe_psql('postgres', qq{
		SET maintenance_work_mem = '4MB';
		SET max_parallel_maintenance_workers = 0;
		SELECT memory_requested FROM bulkhead_classify(\$q\$$stmt\$q\$);});
}

is(requested('ALTER TABLE t ALTER COLUMN b TYPE bigint'), '4194304',
	'control: ALTER TABLE ALTER COLUMN TYPE (a rewrite) requests maintenance_work_mem');
is(requested('ALTER TABLE t ADD COLUMN z int DEFAULT 0'), '0',
	'control: a constant default requests nothing');
is(requested('ALTER TYPE comp ALTER ATTRIBUTE x TYPE bigint'), '0',
	'ALTER TYPE ... ALTER ATTRIBUTE TYPE (no storage) requests nothing');
is(requested('ALTER FOREIGN TABLE ft ALTER COLUMN a TYPE bigint'), '0',
	'ALTER FOREIGN TABLE ... ALTER COLUMN TYPE (no storage) requests nothing');
is(requested('ALTER FOREIGN TABLE ft ADD COLUMN r float8 DEFAULT random()'), '0',
	'ALTER FOREIGN TABLE ... ADD COLUMN with a volatile default requests nothing');
my @valid = ('ALTER FOREIGN TABLE ft ALTER COLUMN a TYPE bigint',
	'ALTER FOREIGN TABLE ft ADD COLUMN r float8 DEFAULT random()');
if ($version >= 170000)
{
	is(requested('ALTER TABLE parted SET ACCESS METHOD heap'), '0',
		'SET ACCESS METHOD of a partitioned table (no rewrite) requests nothing');
	push @valid, 'ALTER TABLE parted SET ACCESS METHOD heap';
}
if ($version >= 180000)
{
	is(requested('ALTER TABLE t ALTER COLUMN v SET EXPRESSION AS (a * 3)'), '0',
		'SET EXPRESSION of a virtual generated column (no rewrite) requests nothing');
	push @valid, 'ALTER TABLE t ALTER COLUMN v SET EXPRESSION AS (a * 3)';
}

# each is a valid statement that runs (outside any workload)
foreach my $stmt (@valid)
{
	my ($r, $o, $e) = $node->psql('postgres', $stmt);
	is($r, 0, "valid: $stmt") or diag $e;
}

# the consequence: the catalog-only ALTER TYPE waits behind a cursor
my ($h) = verbose_session($node);
is(sql($h, "BEGIN; SELECT bulkhead_acquire_xact('w');"), '', 'a session takes a permit of w');
sql($h, 'DECLARE c CURSOR FOR SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s');
is($node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
	'2097152', 'a cursor holds 2 MB of w\'s 3 MB');
my ($ret, $out, $err) = $node->psql('postgres', q{
	SET bulkhead.exempt_superuser = off;
	SET bulkhead.workload = 'w';
	SET maintenance_work_mem = '64MB';
	SET statement_timeout = '3s';
	ALTER TYPE comp ALTER ATTRIBUTE y TYPE bigint;});
is($ret, 0, 'ALTER TYPE ... ALTER ATTRIBUTE runs at once, no wait for memory it never uses')
  or diag $err;
sql($h, 'ROLLBACK');
close_session($h);
ok(poll_until($node, 'SELECT memory_granted = 0 FROM bulkhead_memory'), 'nothing left granted');

done_testing();
