# 055_max_connections.pl: every connection slot of the server is used, all
# but two by callers queued on one workload (max_running 1).  The queue
# holds them all in arrival order, the server refuses one more connection,
# and then the permit is released one caller at a time: every caller is
# served, strictly in arrival order, none times out or is cancelled, and at
# the end all counts are 0.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $max_connections = 20;

my $node = PostgreSQL::Test::Cluster->new('max_connections');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "max_connections = $max_connections\n"
	  . "log_line_prefix = '%m [%p] %b '\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('one', 1, 100, '300s');
	});
wait_loaded($node, 'one', 1);

# One monitoring session M, one holder H, and waiters on every other slot.
# The test's sessions are all superuser ones, so the reserved slots count.
my $m = session($node);
my $h = session($node);
my $nwaiters = $max_connections - 2;
my @w = map { session($node) } 1 .. $nwaiters;
my @wpid = map { sql($_, 'SELECT pg_backend_pid()') } @w;
my $hpid = sql($h, 'SELECT pg_backend_pid()');

# Poll with the monitoring session (no connection is left for another)
sub mpoll
{
	my ($query, $timeout) = @_;
	$timeout //= 30;
	my $deadline = time() + $timeout;
	my $out;
	while (time() < $deadline)
	{
		$out = sql($m, "SELECT ($query)");
		return 1 if $out eq 't';
		select(undef, undef, undef, 0.05);
	}
	diag "mpoll timed out: $query\nlast: $out";
	return 0;
}

is(sql($h, "SELECT bulkhead_acquire('one')"), '', 'H holds the only permit');
for my $i (0 .. $#w)
{
	send_async($w[$i], "SELECT bulkhead_acquire('one');");
	mpoll("SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
		  . " WHERE pid = $wpid[$i] AND a.state = 'queued' AND p.wait_event_type = 'Extension'")
	  or BAIL_OUT("waiter $i never queued");
}
pass("$nwaiters callers queued one after the other");
is( sql(
		$m,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"),
	$max_connections,
	"all $max_connections connection slots are in use");
# (the query as -c, nothing on stdin: a psql refused at once has no stdin
# left to write to, which IPC::Run would die of)
my ($ret, $out, $err) =
  $node->psql('postgres', '', extra_params => [ '-c', 'SELECT 1' ]);
like($err, qr/too many clients already/, 'one more connection is refused');
is( sql(
		$m,
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension'"
		  . " AND backend_type = 'client backend'"),
	$nwaiters,
	"the $nwaiters waiters wait on their latch (wait event type Extension)");
is(sql($m, "SELECT string_agg(pid::text, ',' ORDER BY since) FROM bulkhead_activity WHERE state = 'queued'"),
	join(',', @wpid), 'bulkhead_activity lists them in arrival order');
is(sql($m, "SELECT running || '/' || queued || '/' || peak_queued FROM bulkhead_stats"),
	"1/$nwaiters/$nwaiters", "running 1, queued $nwaiters");

# Release one at a time: each release serves exactly the next in line
my @served;
my $holder = $h;
my $ok = 1;
for my $i (0 .. $#w)
{
	my $r = sql($holder, "SELECT bulkhead_release('one')");
	$ok &&= is($r, '', 'release ' . ($i + 1));
	my ($o, $e) = finish_async($w[$i]);
	$ok &&= is($e, '', "waiter " . ($i + 1) . " served");
	push @served, sql($m,
		"SELECT string_agg(pid::text, ',') FROM bulkhead_activity WHERE state = 'running'");
	$ok &&= is( sql($m, "SELECT running || '/' || queued FROM bulkhead_stats"),
		'1/' . ($nwaiters - $i - 1), 'running 1, queued ' . ($nwaiters - $i - 1));
	$holder = $w[$i];
	last unless $ok;
}
is(join(',', @served), join(',', @wpid), 'served in arrival order, every one of them');
is(sql($holder, "SELECT bulkhead_release('one')"), '', 'the last one releases');

is( sql(
		$m,
		"SELECT running || '/' || queued || '/' || acquired || '/' || released || '/'"
		  . " || timed_out || '/' || cancelled || '/' || rejected_full FROM bulkhead_stats"),
	'0/0/' . ($nwaiters + 1) . '/' . ($nwaiters + 1) . '/0/0/0',
	'running 0, queued 0; all acquired and released, none timed out, cancelled or rejected');
is(sql($m, 'SELECT count(*) FROM bulkhead_activity'), '0', 'bulkhead_activity is empty');

close_session($_) for ($m, $h, @w);
$node->stop;
done_testing();
