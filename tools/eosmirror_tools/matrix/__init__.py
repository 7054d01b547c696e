"""`make matrix`: the eosmirror wheel installed beside each supported Airflow and PySpark line (#30)."""
