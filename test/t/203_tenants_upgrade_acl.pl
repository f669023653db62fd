# 203_tenants_upgrade_acl.pl: the keyed acquire functions of 1.2, which
# replace the two-argument ones of 1.1, and the privileges an operator set
# on those.  An install at 1.1 on which EXECUTE on
# bulkhead_acquire(text, interval) was revoked from PUBLIC and granted to a
# role (one whose name needs quoting) is updated 1.0 -> 1.1 -> 1.2: the
# keyed function must be closed the same way, and stay so through pg_dump
# and a restore (it does what the 2-argument function did, so an open one
# would undo the operator's revoke).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = PostgreSQL::Test::Cluster->new('tenants_acl');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n");
$node->start;

my $odd = q{"Odd ""Role"" x"};
$node->safe_psql('postgres', qq{
	CREATE ROLE plain LOGIN;
	CREATE ROLE $odd LOGIN;
	CREATE DATABASE up;
	CREATE DATABASE restored;
});
$node->safe_psql('up', qq{
	CREATE EXTENSION bulkhead VERSION '1.0';
	ALTER EXTENSION bulkhead UPDATE TO '1.1';
	REVOKE EXECUTE ON FUNCTION bulkhead_acquire(text, interval) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION bulkhead_acquire(text, interval) TO $odd;
	ALTER EXTENSION bulkhead UPDATE TO '1.2';
});

# may plain, the odd role, execute each of bulkhead_acquire's overloads?
my $may = q{
	SELECT string_agg(p.oid::regprocedure || ' ' ||
	                  has_function_privilege('plain', p.oid, 'EXECUTE') || ' ' ||
	                  has_function_privilege('Odd "Role" x', p.oid, 'EXECUTE'),
	                  ', ' ORDER BY p.pronargs)
	  FROM pg_proc p WHERE p.proname = 'bulkhead_acquire'};
my $expected = 'bulkhead_acquire(text,interval,text) false true';
is($node->safe_psql('up', $may), $expected,
	'after 1.1 -> 1.2 the keyed function, which replaces bulkhead_acquire(text, interval), has its privileges');

# pg_dump and restore into another database
my $dump = PostgreSQL::Test::Utils::tempdir . '/up.sql';
$node->command_ok(
	[ 'pg_dump', '--schema-only', '-f', $dump, '-d', $node->connstr('up') ],
	'pg_dump of the updated database');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $dump, '-d', $node->connstr('restored') ],
	'restore into a new database');
is($node->safe_psql('restored', $may), $expected,
	'after pg_dump and restore the keyed function is still closed to PUBLIC');

$node->stop;
done_testing();
