# 001_fifo.pl: queued callers get permits in arrival order, and a release
# hands its permit to exactly one waiter (the head), never to a newcomer.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('fifo');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 5, '60s');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL,
	                     at timestamptz NOT NULL DEFAULT clock_timestamp());
	});
wait_loaded($node, 'w', 1);

#
# Part 1: three waiters, released one at a time by the test.
#
my $h = session($node);
is(sql($h, "SELECT bulkhead_acquire('w')"), '', 'holder takes the permit');

my (@w, @pid);
for my $i (1 .. 3)
{
	my $s = session($node);
	push @w, $s;
	push @pid, sql($s, 'SELECT pg_backend_pid()');
	send_async($s,
		"SELECT bulkhead_acquire('w'); INSERT INTO grants (who) VALUES ('w$i');"
	);
	# queued, and asleep on its latch (an entry is queued just before the
	# backend reaches WaitLatch)
	ok( poll_until(
			$node,
			"SELECT count(*) = $i FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
			  . " WHERE a.workload = 'w' AND a.state = 'queued' AND p.wait_event_type = 'Extension'"),
		"waiter w$i is queued");
}

is(activity_states($node, 'w'),
	sql($h, 'SELECT pg_backend_pid()')
	  . ":running,$pid[0]:queued,$pid[1]:queued,$pid[2]:queued",
	'activity lists the holder, then the waiters in arrival order');
is(waiting_backends($node), '3',
	'three client backends wait with wait_event_type Extension');
# The wait event's name: PostgreSQL 17 and later let an extension name its
# own (BulkheadQueue); before, every extension's wait is called Extension.
my $event_name =
  $node->safe_psql('postgres', 'SHOW server_version_num') >= 170000
  ? 'BulkheadQueue'
  : 'Extension';
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(DISTINCT p.wait_event_type || '/' || p.wait_event, ',')
		FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)
		WHERE a.state = 'queued'}),
	"Extension/$event_name",
	"the queued backends show wait event Extension/$event_name");
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(a.pid::text, ',' ORDER BY a.since)
		FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)
		WHERE a.state = 'queued' AND p.wait_event_type = 'Extension'}),
	join(',', @pid),
	'the queued rows are the backends waiting on Extension');

# A newcomer cannot jump the queue, not even with try_acquire.
my $n = session($node);
is(sql($n, "SELECT bulkhead_try_acquire('w')"),
	'f', 'try_acquire of a newcomer fails while others are queued');

# Release, and in the same statement try to take the permit back: it was
# handed to w1 already, so the holder does not get it again.
is( sql($h, "SELECT bulkhead_release('w'), bulkhead_try_acquire('w')"),
	'|f',
	'a permit released is handed to the head waiter, not to a newcomer');

for my $i (1 .. 3)
{
	ok(poll_until($node, "SELECT count(*) = $i FROM grants"),
		"w$i got its permit");
	my $queued_pids = join(',', map { "$_:queued" } @pid[ $i .. 2 ]);
	is(activity_states($node, 'w'),
		"$pid[$i-1]:running" . ($queued_pids ne '' ? ",$queued_pids" : ''),
		"after release $i: w$i runs, the others still queued in order");
	my $st = stats($node, 'w');
	is("$st->{running}/$st->{queued}", '1/' . (3 - $i),
		"after release $i: running = 1, queued = " . (3 - $i));
	is(waiting_backends($node), 3 - $i,
		"after release $i: exactly one waiter was served, the others still wait on Extension"
	);
	my ($out, $err) = sql2($w[ $i - 1 ], "SELECT bulkhead_release('w')");
	is($err, '', "w$i acquired and released without error");
}

is($node->safe_psql('postgres', "SELECT string_agg(who, ',' ORDER BY id) FROM grants"),
	'w1,w2,w3', 'grant order is w1, w2, w3');

my $st = stats($node, 'w');
is("$st->{running}/$st->{queued}", '0/0', 'running = 0, queued = 0 at the end');
is($st->{acquired}, 4, 'four permits acquired');
is($st->{released}, 4, 'four permits released');
is($st->{timed_out}, 2, 'two zero-length waits (the try_acquires) timed out');
is($st->{cancelled}, 0, 'no wait cancelled');

#
# Part 2: four waiters that each hold the permit briefly and release it
# themselves: one release sets off the whole chain, in arrival order.
#
$node->safe_psql('postgres', 'TRUNCATE grants');
sql($h, "SELECT bulkhead_acquire('w')");
push @w, $n;
for my $i (1 .. 4)
{
	send_async($w[ $i - 1 ],
		    "SELECT bulkhead_acquire('w');"
		  . " INSERT INTO grants (who) VALUES ('c$i');"
		  . " SELECT pg_sleep(0.1);"
		  . " SELECT bulkhead_release('w');");
	ok( poll_until(
			$node,
			"SELECT count(*) = $i FROM bulkhead_activity"
			  . " WHERE workload = 'w' AND state = 'queued'"),
		"chained waiter c$i is queued");
}
sql($h, "SELECT bulkhead_release('w')");
ok(poll_until($node, 'SELECT count(*) = 4 FROM grants', 30),
	'all four chained waiters were served');
for my $i (1 .. 4)
{
	my ($out, $err) = finish_async($w[ $i - 1 ]);
	is($err, '', "chained waiter c$i ran without error");
}
is($node->safe_psql('postgres', "SELECT string_agg(who, ',' ORDER BY id) FROM grants"),
	'c1,c2,c3,c4', 'chained grant order is c1, c2, c3, c4');
is( $node->safe_psql(
		'postgres', q{
		SELECT bool_and(d >= '90 ms') FROM (
		  SELECT at - lag(at) OVER (ORDER BY id) AS d FROM grants) s
		WHERE d IS NOT NULL}),
	't',
	'each chained grant came after the previous holder slept (one at a time)');

$st = stats($node, 'w');
is("$st->{running}/$st->{queued}", '0/0', 'running = 0, queued = 0 after the chain');
is($st->{acquired}, $st->{released}, 'acquired = released');

close_session($_) for ($h, @w);
$node->stop;
done_testing();
