# 114_trigger_table.pl: the trigger functions of bulkhead_workload and
# bulkhead_rule fire only on those tables of the extension.  Attached by a
# plain role to a table of its own (possible where EXECUTE on them is
# granted to PUBLIC, as in 1.0 and 1.1), they fail at fire time with 55000
# and do not wake the worker; from 1.2 on the role cannot attach them at
# all (42501); on the extension's tables they still work.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('trigger_table');
$node->safe_psql(
	'postgres', q{
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	CREATE ROLE plain LOGIN;
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('t', 1);
});
wait_loaded($node, 't', 1);

# 1.2 and later: EXECUTE is not granted to PUBLIC, CREATE TRIGGER fails
for my $f ('bulkhead_workload_changed', 'bulkhead_rule_changed')
{
	my ($ret, $out, $err) = $node->psql(
		'postgres', qq{
		\\set VERBOSITY verbose
		CREATE TABLE public.mine12_$f (a int);
		CREATE TRIGGER nudge AFTER INSERT ON public.mine12_$f
		    FOR EACH STATEMENT EXECUTE FUNCTION $f();
	}, extra_params => [ '-U', 'plain' ]);
	like($err, qr/ERROR:  42501: permission denied for function $f/,
		"1.2: a plain role may not attach $f() to its table");
}

# An extension at 1.1 (EXECUTE granted to PUBLIC): the C function refuses
# to run on any table but its own
$node->safe_psql(
	'postgres', q{
	DROP EXTENSION bulkhead;
	CREATE EXTENSION bulkhead VERSION '1.1';
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('t', 1);
});
wait_loaded($node, 't', 1);

for my $f ('bulkhead_workload_changed', 'bulkhead_rule_changed')
{
	my ($ret, $out, $err) = $node->psql(
		'postgres', qq{
		\\set VERBOSITY verbose
		CREATE TABLE public.mine_$f (a int);
		CREATE TRIGGER nudge AFTER INSERT ON public.mine_$f
		    FOR EACH STATEMENT EXECUTE FUNCTION $f();
		INSERT INTO public.mine_$f VALUES (1);
	}, extra_params => [ '-U', 'plain' ]);
	like($err,
		qr/ERROR:  55000: function $f\(\) can only fire on table "bulkhead_(workload|rule)" of extension "bulkhead"/,
		"1.1: $f() on a plain role's table fails at fire time with 55000");
	is($node->safe_psql('postgres', "SELECT count(*) FROM public.mine_$f"),
		'0', "$f(): the plain role's INSERT was rolled back");

	# a superuser's own table is refused as well: not a privilege check
	($ret, $out, $err) = $node->psql(
		'postgres', qq{
		CREATE TABLE public.su_$f (a int);
		CREATE TRIGGER nudge BEFORE INSERT ON public.su_$f
		    FOR EACH STATEMENT EXECUTE FUNCTION $f();
		INSERT INTO public.su_$f VALUES (1);
	});
	like($err, qr/can only fire on table/,
		"$f() on a superuser's table fails too");
}

# the extension's own tables still accept changes and wake the worker
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 2; INSERT INTO bulkhead_rule (position, application_name, workload) VALUES (1, 'x%', 't')");
wait_loaded($node, 't', 2);

$node->stop;
done_testing();
