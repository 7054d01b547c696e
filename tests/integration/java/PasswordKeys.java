import org.apache.kafka.common.config.ConfigDef;
import java.lang.reflect.*;
import java.util.*;
/**
 * Every ConfigDef.Type.PASSWORD key of Kafka's producer, consumer, admin, MirrorMaker 2 and Connect
 * configs, one per line: the settings Kafka itself treats as secret (eosmirror must too).
 */
public class PasswordKeys {
  public static void main(String[] a) throws Exception {
    TreeSet<String> out = new TreeSet<>();
    for (String cls : new String[]{"org.apache.kafka.clients.producer.ProducerConfig",
        "org.apache.kafka.clients.consumer.ConsumerConfig", "org.apache.kafka.clients.admin.AdminClientConfig",
        "org.apache.kafka.connect.mirror.MirrorSourceConfig", "org.apache.kafka.connect.mirror.MirrorCheckpointConfig",
        "org.apache.kafka.connect.mirror.MirrorHeartbeatConfig", "org.apache.kafka.connect.mirror.MirrorMakerConfig",
        "org.apache.kafka.connect.runtime.distributed.DistributedConfig"}) {
      for (Field f : Class.forName(cls).getDeclaredFields()) {
        if (!Modifier.isStatic(f.getModifiers()) || f.getType() != ConfigDef.class) continue;
        f.setAccessible(true);
        ConfigDef d = (ConfigDef) f.get(null);
        if (d == null) continue;
        for (ConfigDef.ConfigKey k : d.configKeys().values()) if (k.type == ConfigDef.Type.PASSWORD) out.add(k.name);
      }
    }
    for (String s : out) System.out.println(s);
  }
}
