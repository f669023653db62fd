# 009_max_bypass_review.pl: review of max_bypass (issue 25) beyond 008.
#
# 1. In a tree of budgets, max_bypass reorders the waiters of its own leaf
#    only.  Between sibling leaves that tie on the budget's order (both
#    under their reservation), the next permit goes to the leaf with the
#    oldest head waiter (DESIGN.md, "Shared budgets"), whichever of its
#    waiters that leaf then serves.  A leaf with max_bypass must not lose
#    that tie because the waiter it would serve is its newest: its oldest
#    waiter would then wait behind every later arrival of its sibling
#    (until max_bypass, or its queue_timeout).
# 2. With max_bypass >= queue_timeout, a waiter passed over times out:
#    53B02, counted in timed_out, while the newer waiter got the permit.
# 3. An install still at 1.1 (no max_bypass column) keeps strict FIFO with
#    the new library.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('max_bypass_review');

# g (1 permit) > p (2) > leaves a (reserved 1, max_bypass 1h) and b
# (reserved 1, FIFO): g lets one permit out at a time, and at each grant
# both leaves are under their reservation, so the tie goes to the oldest
# head waiter.
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('g', 1, 0, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('p', 2, 0, '60s', 'g');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent, reserved, max_bypass)
	VALUES ('a', 1, 10, '60s', 'p', 1, '1h'),
	       ('b', 1, 10, '60s', 'p', 1, NULL);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_bypass)
	VALUES ('s', 1, 10, '2s', '1h');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL);
	});
ok( poll_until(
		$node,
		"SELECT string_agg(workload || ':' || coalesce(parent, '-') || ':' || reserved, ','"
		  . " ORDER BY workload) = 'a:p:1,b:p:1,g:-:0,p:g:0,s:-:0' FROM bulkhead_stats"),
	'the tree g > p > {a, b} and workload s are loaded');

# 1. a1 is the oldest waiter of the tree; b1..b3 come next, a2 last.  a's
# head (a1) is older than b's (b1): a is served first, and serves its
# newest (a2); then a1, still older than b1; then b's in order.  On the
# code under review a offers a2's arrival, the newest of all, and loses
# every tie: b1, b2, b3, a2, a1.
my $h = session($node);
is(sql($h, "SELECT bulkhead_acquire('a')"), '', 'the tree\'s one permit is held');
my @s = queue_recorders($node, [ 'a', 'a1' ], [ 'b', 'b1' ], [ 'b', 'b2' ], [ 'b', 'b3' ],
	[ 'a', 'a2' ]);
sql($h, "SELECT bulkhead_release('a')");
is(grant_order($node, 5), 'a2,a1,b1,b2,b3',
	'max_bypass reorders its own leaf only: between leaves, the oldest head waiter first');
finish_recorders(@s);

# 2. s: queue_timeout 2 s < max_bypass 1 h.  o waits first, n after it;
# the release goes to n (newest), which holds 4 s: o times out with 53B02.
my ($o, $opid) = verbose_session($node);
sql($h, "SELECT bulkhead_acquire('s')");
send_async($o, "SELECT bulkhead_acquire('s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 's' AND state = 'queued'"),
	'o is queued for s');
my $n = session($node);
send_async($n,
	"SELECT bulkhead_acquire('s'); SELECT pg_sleep(4); SELECT bulkhead_release('s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 2 FROM bulkhead_activity WHERE workload = 's' AND state = 'queued'"),
	'n is queued behind o');
sql($h, "SELECT bulkhead_release('s')");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
		  . " WHERE a.workload = 's' AND a.state = 'running' AND p.query LIKE '%pg_sleep(4)%'"),
	'the release went to n, the newest waiter');
my ($out, $err) = finish_async($o);
like($err, qr/53B02: timed out waiting for a permit of workload "s"/,
	'o, passed over, times out with 53B02');
(undef, $err) = finish_async($n);
is($err, '', 'n acquired and released');
is($node->safe_psql('postgres',
		"SELECT acquired || ' ' || timed_out || ' ' || released || ' ' || running || '/' || queued"
		  . " FROM bulkhead_stats WHERE workload = 's'"),
	'2 1 2 0/0', 's: o counted timed out; h and n acquired and released');
close_session($o);
close_session($n);
close_session($h);
$node->stop;

# 3. An install still at 1.1 (no max_bypass column): FIFO, with the new
# library
my $old = PostgreSQL::Test::Cluster->new('at_1_1');
$old->init;
$old->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\nbulkhead.database = 'postgres'\n");
$old->start;
$old->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead VERSION '1.1';
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 10, '60s');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL);
	});
wait_loaded($old, 'w', 1);
$h = session($old);
sql($h, "SELECT bulkhead_acquire('w')");
@s = queue_recorders($old, [ 'w', 'x' ], [ 'w', 'y' ], [ 'w', 'z' ]);
sql($h, "SELECT bulkhead_release('w')");
is(grant_order($old, 3), 'x,y,z', 'an install at 1.1 keeps arrival order');
finish_recorders(@s);
close_session($h);
$old->stop;
done_testing();
