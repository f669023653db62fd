# 110_rules_security.pl: the worker reads only the extension's own tables.
#
# With the extension still at SQL 1.0 (no bulkhead_rule of its own) in a
# schema where PUBLIC may create (the default before PostgreSQL 15), a
# plain role makes its own public.bulkhead_rule:
#  1. a view whose workload column calls the role's PL/pgSQL function that
#     makes the role a superuser: after loads of the workloads, the role is
#     still not a superuser (the worker never read the view, nor ran the
#     function);
#  2. a table of that name with columns of the wrong types (and a row):
#     the worker keeps running (same pid, nothing terminated by a signal)
#     and workloads still load.
# Then, at 1.1, the extension's own bulkhead_rule with a column altered to
# another type: the load fails with a clear message, once, and the worker
# stays up with the definitions loaded before.
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

my $node = PostgreSQL::Test::Cluster->new('rules_security');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "log_line_prefix = '%m [%p] %b '\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION bulkhead VERSION '1.0';
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	CREATE ROLE attacker LOGIN;
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', 1);
});
wait_loaded($node, 'w', 1);
my $worker = worker_pid($node);
isnt($worker, '', 'the worker runs');

# 1. the view, made by the plain role
$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION public.escalate() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
	    ALTER ROLE attacker SUPERUSER;
	    RETURN 'w';
	END $$;
	CREATE VIEW public.bulkhead_rule AS
	    SELECT 1 AS position, NULL::text AS role, NULL::text AS database,
	           NULL::text AS application_name, NULL::inet AS client_addr,
	           public.escalate() AS workload;
}, extra_params => [ '-U', 'attacker' ]);
is($node->safe_psql('postgres', 'SELECT pg_catalog.to_regclass(\'public.bulkhead_rule\') IS NOT NULL'),
	't', 'the plain role made public.bulkhead_rule (a view)');

# loads: one asked for by a committed change, and then the next one
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_running = 2");
wait_loaded($node, 'w', 2);
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_running = 3");
wait_loaded($node, 'w', 3);
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
	'f', 'the plain role is not a superuser after the worker loaded');

# 2. a table of that name, with columns of other types
$node->safe_psql(
	'postgres', q{
	DROP VIEW public.bulkhead_rule;
	CREATE TABLE public.bulkhead_rule (position text, role int, database int,
	    application_name int, client_addr text, workload int);
	INSERT INTO public.bulkhead_rule VALUES ('x', 1, 2, 3, 'y', 4);
}, extra_params => [ '-U', 'attacker' ]);
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_running = 4");
wait_loaded($node, 'w', 4);
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_running = 5");
wait_loaded($node, 'w', 5);
is(worker_pid($node), $worker, 'the worker kept running (same pid)');
ok(!$node->log_contains('terminated by signal'),
	'no process was terminated by a signal');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
	'f', 'the plain role is still not a superuser');

# 3. at 1.1, the extension's own bulkhead_rule, with a column of the wrong
# type (only a superuser can do that): the load fails, the worker stays
$node->safe_psql(
	'postgres', q{
	DROP TABLE public.bulkhead_rule;
	ALTER EXTENSION bulkhead UPDATE TO '1.1';
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('v', 1);
	INSERT INTO bulkhead_rule (position, application_name, workload)
	VALUES (1, 'sec%', 'v');
});
wait_loaded($node, 'v', 1);
is($node->safe_psql('postgres',
		"SET application_name = 'sec1'; SET bulkhead.exempt_superuser = off; SELECT workload FROM bulkhead_classify()"),
	'v', 'the extension\'s own rules are read at 1.1');
my $offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
	ALTER TABLE bulkhead_rule ALTER COLUMN position TYPE bigint;
	UPDATE bulkhead_workload SET max_running = 6 WHERE name = 'w';
});
ok( log_wait($node,
		qr/could not load the workload definitions: column "position" of table "bulkhead_rule" has type bigint, not integer/,
		$offset),
	'a column of another type fails the load with a clear message');
sleep 3;    # tries at every tick meanwhile
my $log = slurp_file($node->logfile, $offset);
my $count = () = $log =~ /could not load the workload definitions/g;
is($count, 1, 'the failure is logged once');
is($node->safe_psql('postgres',
		"SELECT max_running FROM bulkhead_stats WHERE workload = 'w'"),
	'5', 'the definitions loaded before stay in force');
is(worker_pid($node), $worker, 'the worker kept running (same pid)');
$node->safe_psql('postgres',
	'ALTER TABLE bulkhead_rule ALTER COLUMN position TYPE integer');
wait_loaded($node, 'w', 6);
ok(log_wait($node, qr/workload definitions were loaded again/, $offset),
	'the next load after the repair succeeds, and says so');

$node->stop;
done_testing();
