# 111_load_lock.pl: a lock on bulkhead_workload does not freeze the worker.
#
# A session holds ACCESS EXCLUSIVE on bulkhead_workload, in an open
# transaction, while a committed change of bulkhead_rule asks for a load.
# The load gives up after lock_timeout and is tried again every second,
# logged once; meanwhile the worker's control loop goes on: an adaptive
# workload whose holders are all useful (idle in their clients) and whose
# queue is not empty has its limit raised, and the caller in the queue is
# served, while the lock is still held.  Once the lock is released, the
# pending load happens (the rule change reaches the sessions).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# Wait (at most 30 s) until the log after $offset matches $re.
sub log_wait
{
	my ($node, $re, $offset) = @_;
	my $deadline = time() + 30;
	while (time() < $deadline)
	{
		return 1 if slurp_file($node->logfile, $offset) =~ $re;
		usleep(100_000);
	}
	return 0;
}

my $node = bulkhead_node('load_lock');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload
	    (name, max_running, min_running, adaptive, max_queued, queue_timeout)
	VALUES ('ad', 2, 2, true, 5, '60s');
	INSERT INTO bulkhead_rule (position, application_name, workload)
	VALUES (1, 'nobody-matches', 'ad');
});
wait_loaded($node, 'ad', 2);
# an UPDATE keeps the limit in force (2) and lets it grow up to 6
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET min_running = 1, max_running = 6");
wait_loaded($node, 'ad', 6);
is($node->safe_psql('postgres',
		"SELECT current_limit FROM bulkhead_stats WHERE workload = 'ad'"),
	'2', 'the adaptive limit in force is 2');

# two holders, idle in their clients: useful work (see adaptive.c)
my @holders = map { session($node) } 1 .. 2;
is(sql($_, "SELECT bulkhead_acquire('ad')"), '', 'a holder acquires')
  for @holders;

my $locker = session($node);
sql($locker,
	'BEGIN; LOCK TABLE bulkhead_workload IN ACCESS EXCLUSIVE MODE; SELECT 1');
my $offset = -s $node->logfile;
# a committed change asks for a load (it does not touch the locked table)
$node->safe_psql('postgres',
	"UPDATE bulkhead_rule SET application_name = 'locktest%' WHERE position = 1");
ok( poll_until(
		$node, q{
		SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		               WHERE a.backend_type = 'bulkhead' AND NOT l.granted)},
		10)
	  || $node->log_contains('could not load the workload definitions', $offset),
	'the worker tried to load');

# a third caller queues; the worker raises the limit and serves it
my $waiter = session($node);
my $wpid = sql($waiter, 'SELECT pg_backend_pid()');
send_async($waiter, "SELECT bulkhead_acquire('ad');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $wpid AND state = 'running'",
		20),
	'the queued caller is served by an adaptive raise while the table is locked'
);
is($node->safe_psql('postgres',
		"SELECT granted FROM pg_locks WHERE relation = 'bulkhead_workload'::regclass AND mode = 'AccessExclusiveLock'"),
	't', 'the lock was held all along');
ok( log_wait($node,
		qr/could not load the workload definitions: canceling statement due to lock timeout/,
		$offset),
	'the failed load is logged');
is($node->safe_psql('postgres',
		"SET application_name = 'locktest1'; SET bulkhead.exempt_superuser = off; SELECT coalesce(workload, 'none') FROM bulkhead_classify()"),
	'none', 'the rule change waits for the load');
sleep 2;    # more tries, at every tick
my $log = slurp_file($node->logfile, $offset);
my $count = () = $log =~ /could not load the workload definitions/g;
is($count, 1, 'the failure is logged once while it lasts');

sql($locker, 'COMMIT');
ok( poll_until(
		$node,
		"SET application_name = 'locktest1'; SET bulkhead.exempt_superuser = off; SELECT workload = 'ad' FROM bulkhead_classify()",
		10),
	'once the lock is released, the pending load happens');
ok(log_wait($node, qr/workload definitions were loaded again/, $offset),
	'the recovery is logged');
my ($out, $err) = finish_async($waiter);
is($err, '', 'the waiter\'s acquire succeeded');

close_session($_) for (@holders, $waiter, $locker);
$node->stop;
done_testing();
