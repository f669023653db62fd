# 117_gate_roles_outer_user.pl: the gate checks a workload's roles against
# the session's own user, the one it classified, not against the owner of a
# SECURITY DEFINER function whose statement reached the gate first (the
# planner runs an IMMUTABLE function with constant arguments before the
# calling statement starts).
#
# A member of the workload's roles, sent there by a rule, gets its permit;
# a non-member, sent there by a rule, gets 42501 even through a function
# owned by a member.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('gate_roles_outer_user');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE member_r LOGIN;
	CREATE ROLE other_r LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, roles)
	VALUES ('members', 4, 0, '0', '{member_r}');
	INSERT INTO bulkhead_rule (position, role, workload)
	VALUES (10, 'member_r', 'members'), (20, 'other_r', 'members');
	CREATE TABLE public.one (i int);
	INSERT INTO public.one VALUES (1);
	GRANT SELECT ON public.one TO member_r, other_r;
	-- run by the planner before the calling statement, as its owner
	CREATE FUNCTION public.by_other(int) RETURNS int
	    LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
	    AS 'BEGIN RETURN (SELECT i FROM public.one) + $1; END';
	ALTER FUNCTION public.by_other(int) OWNER TO other_r;
	CREATE FUNCTION public.by_member(int) RETURNS int
	    LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
	    AS 'BEGIN RETURN (SELECT i FROM public.one) + $1; END';
	ALTER FUNCTION public.by_member(int) OWNER TO member_r;
});
wait_loaded($node, 'members', 4);
wait_classified($node, 'member_r', 'members');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT public.by_other(1)',
	extra_params => [ '-U', 'member_r' ]);
is($ret, 0, 'a member gets its permit through a non-member\'s function')
  or diag $err;
is($out, '2', 'and its statement runs');

($ret, $out, $err) = $node->psql('postgres', 'SELECT public.by_member(1)',
	extra_params => [ '-U', 'other_r' ]);
isnt($ret, 0, 'a non-member is refused through a member\'s function');
like($err, qr/permission denied for workload "members"/,
	'with the workload\'s 42501');

is($node->safe_psql('postgres',
		"SELECT running FROM bulkhead_stats WHERE workload = 'members'"),
	'0', 'no permit left held');

$node->stop;
done_testing();
