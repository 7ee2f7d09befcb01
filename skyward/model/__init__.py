"""The data a pool is described by: ``Spec`` and its parts, the ``Plugin`` type, the
``Cluster`` plugin hooks see and the ``NodeHandle`` a provider hands out."""
