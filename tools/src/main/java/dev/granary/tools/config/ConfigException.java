package dev.granary.tools.config;

/** A bad configuration value or file; its message is one line, printed as is by the CLI. */
public class ConfigException extends RuntimeException {
    public ConfigException(String message) {
        super(message);
    }
}
