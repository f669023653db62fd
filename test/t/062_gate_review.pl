# The early gate (transparent.c) runs when the planner starts on a client's
# top-level statement, not at its parse analysis: a protocol-level Parse
# that no Bind/Execute follows in its transaction (PQprepare, psql's \parse,
# pgbench -M prepared, drivers that prepare before they execute) plans
# nothing, so it takes no permit, and is neither queued nor refused.  (A
# first version gated at the end of parse analysis, where Parse is
# analysed too: a single-threaded client that prepares synchronously and
# runs its connections' transactions asynchronously, pgbench -M prepared
# -j 1, then blocked its own thread in a Parse queued behind a permit that
# another of its connections held in an open transaction, until
# queue_timeout.)  psql's \parse is 18's: checks 1 and 2 need it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('gate_review');
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 10, '0');
	CREATE ROLE app LOGIN;
	ALTER ROLE app SET bulkhead.workload = 'w';
	CREATE TABLE t (i int);
	GRANT SELECT ON t TO app;
});
wait_loaded($node, 'w', 1);

sub counts
{
	return $node->safe_psql('postgres',
		"SELECT running || '/' || queued || '/' || acquired || '/' || released FROM bulkhead_stats WHERE workload = 'w'"
	);
}

SKIP:
{
skip "psql's \\parse is PostgreSQL 18's", 5 if $node->pg_version < 18;

# 1. A Parse alone (psql \parse: Parse + Sync) takes no permit
$node->safe_psql('postgres', "SELECT bulkhead_stats_reset('w')");
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT count(*) FROM t \\parse s1\n",
	extra_params => [ '-U', 'app' ]);
is($ret, 0, 'a Parse alone succeeds');
is(counts(), '0/0/0/0', 'a Parse alone takes no permit');

# 2. With w's only permit held and no queueing (queue_timeout 0), a Parse
# alone is not refused: nothing runs
my $holder = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'app' ]);
$holder->query_safe('BEGIN');
$holder->query_safe('SELECT 1');
like(counts(), qr{^1/0/}, 'the holder holds the permit of w');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT count(*) FROM t \\parse s1\n",
	extra_params => [ '-U', 'app' ]);
is($ret, 0, 'a Parse alone succeeds while the workload is full');
is($err, '', 'a Parse alone is not refused while the workload is full');
$holder->query_safe('COMMIT');
$holder->quit;
}

# 3. pgbench -M prepared, one thread, two clients, one permit: the
# prepares must not stall the run until queue_timeout (5 s here)
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET queue_timeout = '5s', max_queued = 11 WHERE name = 'w'");
ok(poll_until($node, "SELECT max_queued = 11 FROM bulkhead_stats WHERE workload = 'w'"),
	'queue_timeout 5 s loaded');
my $script = $node->basedir . '/txn.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"BEGIN;\nSELECT 1;\nSELECT 2;\nEND;\n");
my ($pb_out, $pb_err) = run_command(
	[
		'pgbench', '-n', '-M', 'prepared', '-c', '2', '-j', '1', '-t', '20',
		'-f', $script, '-h', $node->host, '-p', $node->port,
		'-U', 'app', 'postgres'
	]);
like($pb_out, qr/number of transactions actually processed: 40\/40/,
	'pgbench -M prepared -j 1 runs all its transactions');
unlike($pb_err, qr/timed out waiting for a permit/,
	'no client of pgbench -M prepared times out in a prepare');

$node->stop;
done_testing();
