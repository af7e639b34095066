package kube_test

import "k8s.io/apimachinery/pkg/runtime"

var runtimeConverter = runtime.DefaultUnstructuredConverter
