package org.apache.kafka.connect.mirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.kafka.common.utils.Utils;

/**
 * What MirrorMaker 2 itself selects for one flow of an mm2.properties, name by name.
 *
 * The file is loaded as MirrorMaker.main loads it (Utils.loadProps), the flow's connector configs are
 * built by MirrorMakerConfig.connectorBaseConfig (cluster-prefixed and A->B-prefixed keys resolved as MM2
 * resolves them), and the decisions are MM2's own: MirrorSourceConnector.shouldReplicateTopic (the
 * configured topic.filter.class -- DefaultTopicFilter unless set -- plus the replication policy's
 * internal-topic rule and the cycle guard), shouldReplicateTopicConfigurationProperty (the configured
 * config.property.filter.class), and MirrorCheckpointConfig's group.filter.class. In this package
 * because those methods are package-private.
 *
 * Arguments: file source-alias target-alias. Standard input: lines "topic NAME", "group NAME",
 * "config NAME". Output: "KIND NAME true|false" per line.
 */
public class MM2Selection {
    public static void main(String[] args) throws Exception {
        Map<String, String> raw = Utils.propsToStringMap(Utils.loadProps(args[0]));
        MirrorMakerConfig mm2 = new MirrorMakerConfig(raw);
        SourceAndTarget flow = new SourceAndTarget(args[1], args[2]);
        MirrorSourceConfig source = new MirrorSourceConfig(mm2.connectorBaseConfig(flow, MirrorSourceConnector.class));
        MirrorCheckpointConfig checkpoint =
            new MirrorCheckpointConfig(mm2.connectorBaseConfig(flow, MirrorCheckpointConnector.class));
        MirrorSourceConnector connector = new MirrorSourceConnector(flow, source.replicationPolicy(),
            source.topicFilter(), source.configPropertyFilter());
        GroupFilter groups = checkpoint.groupFilter();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isEmpty()) continue;
            String[] parts = line.split(" ", 2);
            boolean chosen = switch (parts[0]) {
                case "topic" -> connector.shouldReplicateTopic(parts[1]);
                case "group" -> groups.shouldReplicateGroup(parts[1]);
                case "config" -> connector.shouldReplicateTopicConfigurationProperty(parts[1]);
                default -> throw new IllegalArgumentException("unknown kind: " + line);
            };
            System.out.println(parts[0] + " " + parts[1] + " " + chosen);
        }
    }
}
