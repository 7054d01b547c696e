// What a MirrorMaker 2 user runs to move a group: RemoteClusterUtils.translateOffsets (connect-mirror-client).
// Usage: java -cp <kafka jars>:. TranslateOffsets <bootstrap of the checkpoints' cluster> <upstream alias> <group>
// Prints one line per partition: <topic> <partition> <offset>
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = new HashMap<>();
        properties.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(properties, args[1], args[2], Duration.ofSeconds(60));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
            System.out.println(entry.getKey().topic() + " " + entry.getKey().partition() + " "
                    + entry.getValue().offset());
        }
    }
}
