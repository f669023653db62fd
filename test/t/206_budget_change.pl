# 206_budget_change.pl: budgets renamed, re-parented and dropped while a
# child still drains its holders and waiters.  At every step (checked by
# levels_hold, BulkheadTest.pm) every level of every tree counts exactly
# the permits held in its subtree, none is over its limit, and each
# workload's counters pair up: acquired + moved_in = released + moved_out
# + running.  Permits that change budgets with their workload (a rename
# of the budget, a re-parenting, a detach) count as moved out of the
# budgets they leave and into those they join.  Throughout, a monitor
# session reads bulkhead_stats in a loop and records any level seen over
# its limit.
#
#  1. the budget of a child that holds and has waiters is renamed;
#  2. that child is re-parented to another budget;
#  3. the child itself is renamed (its old name drains under the budget);
#  4. a child is detached (parent = NULL), then its budget deleted;
#  5. a child and its budget are deleted in one transaction while the child
#     holds and has a waiter: the holders release by the old name, the
#     waiter is served, the grandparent counts them until they are gone;
#  6. a budget renamed back and forth 60 times while two sessions try to
#     take permits by both its names: none is ever granted (neither name
#     is a leaf for an instant while the worker loads the rename).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('budget_change');
$node->safe_psql('postgres', q{
	CREATE TABLE over_limit (seen text);
	CREATE TABLE monitor_ctl (stop boolean);
	INSERT INTO monitor_ctl VALUES (false);
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('g', 6, 0);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES
	    ('p', 3, 0, 'g'), ('q', 4, 0, 'g');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent) VALUES
	    ('c', 4, 5, '60s', 'p'), ('d', 3, 5, '60s', 'p'), ('e', 4, 5, '60s', 'q');
});
ok(poll_until($node, "SELECT count(*) = 6 FROM bulkhead_stats"), 'the tree is loaded');

# the monitor: any level over its limit, at any moment, is recorded
my $monitor = session($node);
send_async($monitor, q{
DO $$
BEGIN
    WHILE NOT (SELECT stop FROM monitor_ctl) LOOP
        INSERT INTO over_limit
        SELECT workload || ' ' || running || '/' || current_limit
          FROM bulkhead_stats
         WHERE mode = 'enforce' AND running > current_limit;
        PERFORM pg_sleep(0.002);
    END LOOP;
END $$;});

my @s = map { session($node) } 1 .. 6;

# callers queued in workload $w: $n of them, asleep
sub queued_in
{
	my ($w, $n) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node,
			"SELECT count(*) = $n FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
			  . " WHERE a.workload = '$w' AND a.state = 'queued'"
			  . " AND p.wait_event_type = 'Extension'"),
		"$n caller(s) queued in $w");
}

sub running_of
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT running FROM bulkhead_stats WHERE workload = '$w'");
}

sub acquire
{
	my ($i, $w) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(sql($s[$i], "SELECT bulkhead_try_acquire('$w')"), 't', "session $i takes a permit of $w");
}

sub release
{
	my ($i, $w) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(sql($s[$i], "SELECT bulkhead_release('$w')"), '', "session $i releases its permit of $w");
}

# a waiter started with send_async: granted without error
sub waiter_granted
{
	my ($i, $w) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($out, $err) = finish_async($s[$i]);
	is($err, '', "the waiter of $w (session $i) was granted");
}

levels_hold($node, 'idle tree');

###########################################################################
# 1. the budget p of c is renamed while c holds p's 3 permits and c and d
#    have a waiter each
###########################################################################
acquire($_, 'c') for 0 .. 2;
send_async($s[3], "SELECT bulkhead_acquire('c', '60s');");
send_async($s[4], "SELECT bulkhead_acquire('d', '60s');");
queued_in('c', 1);
queued_in('d', 1);
levels_hold($node, '1. p full, waiters in c and d');

$node->safe_psql('postgres', "UPDATE bulkhead_workload SET name = 'p2' WHERE name = 'p'");
ok( poll_until(
		$node,
		"SELECT count(*) = 2 FROM bulkhead_stats WHERE parent = 'p2'"
		  . " AND NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'p')"),
	'1. c and d are under p2, p is gone');
is(running_of('p2'), '3', '1. p2 counts the 3 permits c holds');
is(running_of('g'), '3', '1. g still counts them once');
levels_hold($node, '1. after the rename');

release(0, 'c');
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued'"),
	'1. the release served one waiter');
levels_hold($node, '1. one permit handed over under p2');
release(1, 'c');
waiter_granted(3, 'c');
waiter_granted(4, 'd');
levels_hold($node, '1. both waiters served');
release(2, 'c');
release(3, 'c');
release(4, 'd');
is(running_of('p2') . '/' . running_of('g'), '0/0', '1. everything released');
levels_hold($node, '1. drained');

###########################################################################
# 2. c is re-parented from p2 to q while it holds p2's permits and has a
#    waiter: the permits move with it, and q (room for 4) serves the waiter
###########################################################################
acquire($_, 'c') for 0 .. 2;
send_async($s[3], "SELECT bulkhead_acquire('c', '60s');");
queued_in('c', 1);
levels_hold($node, '2. p2 full, a waiter in c');
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET parent = 'q' WHERE name = 'c'");
waiter_granted(3, 'c');
is(running_of('p2') . '/' . running_of('q') . '/' . running_of('g'), '0/4/4',
	'2. the holders of c count in q now (3 moved, 1 granted), in g once');
levels_hold($node, '2. after the re-parenting');
release($_, 'c') for 0 .. 3;
levels_hold($node, '2. drained');

###########################################################################
# 3. c itself is renamed to c2 while it holds two of q's permits and has a
#    waiter; e holds the other two.  The old c drains under q.
###########################################################################
acquire(0, 'c');
acquire(1, 'c');
acquire(2, 'e');
acquire(3, 'e');
send_async($s[4], "SELECT bulkhead_acquire('c', '60s');");
queued_in('c', 1);
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET name = 'c2' WHERE name = 'c'");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'c2' AND parent = 'q'"
		  . " AND NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'c')"),
	'3. c2 is under q, c is gone from bulkhead_stats');
is(running_of('q'), '4', '3. q still counts the permits of the old c');
levels_hold($node, '3. after the rename', c => 'q');
is(sql($s[5], "SELECT bulkhead_try_acquire('c2')"), 'f', '3. q is full for c2 too');
release(0, 'c');
waiter_granted(4, 'c');
levels_hold($node, '3. the waiter of the old c served', c => 'q');
release(1, 'c');
release(4, 'c');
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM bulkhead_activity WHERE workload = 'c')"),
	'3. the old c drained');
acquire(5, 'c2');
levels_hold($node, '3. c2 takes a permit');
release(5, 'c2');
release(2, 'e');
release(3, 'e');
levels_hold($node, '3. drained');

###########################################################################
# 4. k is detached from its budget b (under g) while it holds b's permits
#    and has a waiter; then b is deleted
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('b', 2, 0, 'g');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('k', 2, 5, '60s', 'b');
});
ok(poll_until($node, "SELECT parent = 'b' FROM bulkhead_stats WHERE workload = 'k'"),
	'4. k under b');
acquire(0, 'k');
acquire(1, 'k');
send_async($s[2], "SELECT bulkhead_acquire('k', '60s');");
queued_in('k', 1);
levels_hold($node, '4. b full, a waiter in k');
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET parent = NULL WHERE name = 'k'");
ok(poll_until($node, "SELECT parent IS NULL FROM bulkhead_stats WHERE workload = 'k'"),
	'4. k is a root');
is(running_of('b') . '/' . running_of('g') . '/' . running_of('k'), '0/0/2',
	'4. k took its permits out of b and g');
levels_hold($node, '4. after the detach');
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'b'");
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'b')"),
	'4. b is gone');
release(0, 'k');
waiter_granted(2, 'k');
levels_hold($node, '4. the waiter of k served');
release(1, 'k');
release(2, 'k');
levels_hold($node, '4. drained');
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'k'");

###########################################################################
# 5. k3 and its budget b3 (under g) are deleted in one transaction while
#    k3 holds b3's permits and has a waiter
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('b3', 2, 0, 'g');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('k3', 2, 5, '60s', 'b3');
});
ok(poll_until($node, "SELECT parent = 'b3' FROM bulkhead_stats WHERE workload = 'k3'"),
	'5. k3 under b3');
acquire(0, 'k3');
acquire(1, 'k3');
send_async($s[2], "SELECT bulkhead_acquire('k3', '60s');");
queued_in('k3', 1);
$node->safe_psql('postgres', q{
	BEGIN;
	DELETE FROM bulkhead_workload WHERE name = 'k3';
	DELETE FROM bulkhead_workload WHERE name = 'b3';
	COMMIT;
});
ok( poll_until(
		$node,
		"SELECT NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload IN ('b3', 'k3'))"),
	'5. b3 and k3 are gone from bulkhead_stats');
is(running_of('g'), '2', '5. g still counts the permits of the deleted k3');
levels_hold($node, '5. after the delete', k3 => 'b3', b3 => 'g');
is(sql($s[3], "SELECT bulkhead_try_acquire('e')") . '/'
	  . sql($s[3], "SELECT bulkhead_release('e')"),
	't/', '5. g lends the rest to e');
release(0, 'k3');
waiter_granted(2, 'k3');
levels_hold($node, '5. the waiter of the deleted k3 served', k3 => 'b3', b3 => 'g');
release(1, 'k3');
release(2, 'k3');
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM bulkhead_activity)"),
	'5. nothing held or awaited');
levels_hold($node, '5. drained');
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('b3', 2, 0, 'g');
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES ('k3', 2, 'b3');
});
ok( poll_until(
		$node,
		"SELECT acquired = 0 AND released = 0 AND running = 0 FROM bulkhead_stats WHERE workload = 'k3'"),
	'5. k3 created again starts afresh');
levels_hold($node, '5. b3 and k3 created again');

###########################################################################
# 6. a budget renamed back and forth while callers try to take permits of
#    it by both its names: each name is always a budget or no workload, so
#    no permit is ever granted (the old name never turns into a leaf for an
#    instant between its children leaving it and its removal)
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('rp', 2, 0, 'g');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('rc', 2, 0, 'rp');
	CREATE FUNCTION hammer(seconds float8) RETURNS int LANGUAGE plpgsql AS $$
	DECLARE
	    got int := 0;
	    stop timestamptz := clock_timestamp() + seconds * interval '1s';
	BEGIN
	    WHILE clock_timestamp() < stop LOOP
	        BEGIN
	            IF bulkhead_try_acquire('rp') THEN
	                got := got + 1;
	                PERFORM bulkhead_release('rp');
	            END IF;
	        EXCEPTION WHEN OTHERS THEN NULL;
	        END;
	        BEGIN
	            IF bulkhead_try_acquire('rq') THEN
	                got := got + 1;
	                PERFORM bulkhead_release('rq');
	            END IF;
	        EXCEPTION WHEN OTHERS THEN NULL;
	        END;
	    END LOOP;
	    RETURN got;
	END $$;
});
ok(poll_until($node, "SELECT parent = 'rp' FROM bulkhead_stats WHERE workload = 'rc'"),
	'6. rc under rp');
send_async($s[$_], 'SELECT hammer(8);') for 0 .. 1;
{
	my $name = 'rp';
	for my $i (1 .. 60)
	{
		my $next = $name eq 'rp' ? 'rq' : 'rp';
		$node->safe_psql('postgres',
			"UPDATE bulkhead_workload SET name = '$next' WHERE name = '$name'");
		ok( poll_until(
				$node,
				"SELECT parent = '$next' FROM bulkhead_stats WHERE workload = 'rc'"),
			"6. rename $i loaded") or last;
		$name = $next;
	}
}
for my $i (0 .. 1)
{
	my ($out, $err) = finish_async($s[$i]);
	is($out . $err, '0', "6. session $i took no permit of a budget by either name");
}
levels_hold($node, '6. after the renames');

###########################################################################
# the monitor saw no level over its limit; every counter is zero or paired
###########################################################################
$node->safe_psql('postgres', 'UPDATE monitor_ctl SET stop = true');
my ($out, $err) = finish_async($monitor);
is($err, '', 'the monitor ran to its end');
is($node->safe_psql('postgres', "SELECT coalesce(string_agg(DISTINCT seen, ', '), '') FROM over_limit"),
	'', 'no level was ever seen over its limit');
is( $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(workload, ',' ORDER BY workload), '') FROM bulkhead_stats"
		  . " WHERE running <> 0 OR queued <> 0"),
	'', 'nothing running or queued anywhere');
close_session($_) for (@s, $monitor);
$node->stop;
done_testing();
