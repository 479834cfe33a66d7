// A Hive 2.3 Metastore for tests, built against pyspark's bundled jars.
//
// Serves the thrift metastore on 127.0.0.1:<port> (Hive 2.3 has no bind-host
// option, so this binds the socket itself), keeps its state in an embedded
// Derby database under <dir>, and creates the ACID/lock tables that
// pyiceberg's HiveCatalog needs for commits (HIVE_LOCKS etc.).
//
// Usage: java -cp "<pyspark>/jars/*:<classes>" TidelakeHiveMetastore <port> <dir>

import java.io.File;
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class TidelakeHiveMetastore {
    private TidelakeHiveMetastore() {}

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        File dir = new File(args[1]).getAbsoluteFile();
        dir.mkdirs();
        String jdbc = "jdbc:derby:;databaseName=" + new File(dir, "metastore_db") + ";create=true";
        // HiveConf picks these up from system properties, including inside TxnDbUtil.
        System.setProperty("javax.jdo.option.ConnectionURL", jdbc);
        System.setProperty("javax.jdo.option.ConnectionDriverName", "org.apache.derby.jdbc.EmbeddedDriver");
        System.setProperty("hive.metastore.warehouse.dir", new File(dir, "warehouse").toURI().toString());
        System.setProperty("datanucleus.schema.autoCreateAll", "true");
        System.setProperty("hive.metastore.schema.verification", "false");
        System.setProperty("hive.support.concurrency", "true");
        System.setProperty("hive.txn.manager", "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager");
        System.setProperty("hive.compactor.initiator.on", "false");
        System.setProperty("derby.system.home", dir.toString());

        HiveConf conf = new HiveConf();
        TxnDbUtil.setConfValues(conf);
        TxnDbUtil.prepDb(conf);

        ThriftHiveMetastore.Iface handler = HiveMetaStore.newRetryingHMSHandler("tidelake-test-metastore", conf, false);
        TServerSocket socket = new TServerSocket(new InetSocketAddress("127.0.0.1", port));
        TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
            .processor(new ThriftHiveMetastore.Processor<>(handler))
            .protocolFactory(new TBinaryProtocol.Factory())
            .transportFactory(new TTransportFactory())
            .minWorkerThreads(2)
            .maxWorkerThreads(32);
        TServer server = new TThreadPoolServer(serverArgs);
        System.out.println("METASTORE READY 127.0.0.1:" + port);
        System.out.flush();
        server.serve();
    }
}
